package user_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/user"
)

func TestNormalizeEmail(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ada@example.com":             "ada@example.com",
		"  Ada.Lovelace@Example.COM ": "ada.lovelace@example.com",
		"o'brien+tag@sub.example.org": "o'brien+tag@sub.example.org",
		"x@xn--bcher-kva.example":     "x@xn--bcher-kva.example",
		"a@1.2.3.4.nip.io":            "a@1.2.3.4.nip.io", // a name that resolves to an address is a name
		"a@mail.xn--p1ai":             "a@mail.xn--p1ai",
		"a@3com.com":                  "a@3com.com",
	} {
		got, err := user.NormalizeEmail(in)
		if err != nil || got != want {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "ada", "ada@", "@example.com", "ada@example", "ada@-example.com", "ada@example..com",
		"Ada <ada@example.com>", "ada@example.com (Ada)", "ada @example.com", "ada@[192.0.2.1]",
		"jos\u00e9@example.com",  // composed é: two spellings would name one mailbox
		"jose\u0301@example.com", // decomposed é
		"\u0130@example.com",     // İ, which lower-cases into another mailbox's i
		"\u212a@example.com",     // the Kelvin sign, which lower-cases to k
		"ada@example.com\u200b",  // zero-width space
		"ada\u202e@example.com",  // right-to-left override
		"ada@b\u00fccher.example", "ada\x00@example.com", "ada\t@example.com",
		strings.Repeat("a", 65) + "@example.com",
		// IP addresses in every spelling a resolver takes, and names that
		// no mail domain has: mail must never go to a host by its number.
		"a@127.0.0.1", "a@127.1", "a@2130706433", "a@0x7f000001", "a@0x7f.0x0.0x0.0x1", "a@0177.0.0.1",
		"a@[127.0.0.1]", "a@[IPv6:::1]", "a@[::1]", "a@::1", "a@192.0.2.1", "a@example.123",
		"a@localhost", "a@intranet", "a@com", "a@example.c0m1", "a@example.1com",
		"a@evil.localhost", "a@printer.local", "a@db.internal", "a@x.invalid", "a@abc.onion", "a@x.alt",
		"a@1.0.0.127.in-addr.arpa", "a@router.home.arpa",
		"a@" + strings.Repeat("b", 250) + ".com",
	} {
		if got, err := user.NormalizeEmail(in); !errors.Is(err, user.ErrBadEmail) {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want ErrBadEmail", in, got, err)
		}
	}
}
