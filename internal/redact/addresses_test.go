package redact_test

import (
	"testing"

	"github.com/eventsourced/accounts/internal/redact"
)

func TestAddresses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"NoAddress", "550 no such user", "550 no such user"},
		{"InAngles", "550 <ann@example.com>: no such user", "550 <[address]>: no such user"},
		{"Bare", "rejected ann.b+x@mail.example.com today", "rejected [address] today"},
		{"Quoted", `"ann@example.com"`, `"[address]"`},
		{"InJSON", `{"email":"ann@example.com","id":1}`, `{"email":"[address]","id":1}`},
		{"InEscapedJSON", `"{\"email\":\"ann@example.com\"}"`, `"{\"email\":\"[address]\"}"`},
		{"Several", "a@x.org, b@y.org", "[address], [address]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := redact.Addresses(tc.in); got != tc.want {
				t.Errorf("Addresses(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestLocalPart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, local, want string }{
		{"InParentheses", "550 user [address] (ann.b) unknown", "ann.b", "550 user [address] ([address]) unknown"},
		{"AnyCase", "no mailbox ANN.B here", "ann.b", "no mailbox [address] here"},
		{"AtTheEnds", "ann.b is gone: ann.b", "ann.b", "[address] is gone: [address]"},
		{"Adjacent", "ann.b,ann.b", "ann.b", "[address],[address]"},
		{"InsideAWord", "joann.b and ann.bb stay", "ann.b", "joann.b and ann.bb stay"},
		{"DotIsNoAnyCharacter", "annxb stays", "ann.b", "annxb stays"},
		{"Empty", "550 unknown", "", "550 unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := redact.LocalPart(tc.in, tc.local); got != tc.want {
				t.Errorf("LocalPart(%q, %q) = %q, want %q", tc.in, tc.local, got, tc.want)
			}
		})
	}
}
