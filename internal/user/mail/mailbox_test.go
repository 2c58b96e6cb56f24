package mail_test

import (
	"testing"

	"github.com/eventsourced/accounts/internal/user/mail"
)

func TestMailbox(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ada@example.com":           "ada@example.com",
		"ada+news@example.com":      "ada@example.com",
		"Ada+News@Example.COM":      "ada@example.com",
		"ada+a+b@example.com":       "ada@example.com",
		"ada+@example.com":          "ada@example.com",
		"ada.lovelace@example.com":  "ada.lovelace@example.com", // dots are the provider's business
		"+15550100@sms.example.com": "+15550100@sms.example.com",
		"o'brien+x@sub.example.org": "o'brien@sub.example.org",
		"ada@plus+domain.example":   "ada@plus+domain.example",
		"no-at-sign":                "no-at-sign",
	} {
		if got := mail.Mailbox(in); got != want {
			t.Errorf("Mailbox(%q) = %q, want %q", in, got, want)
		}
	}
}
