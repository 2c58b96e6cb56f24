package user

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
)

// ErrBadEmail is returned for an address that is not a plain, valid email
// address.
var ErrBadEmail = errors.New("user: not an email address")

// NormalizeEmail checks that s is one plain email address (no display name,
// no comments) and returns it trimmed and in lower case, the form in which
// addresses are compared and stored. Addresses are ASCII: the SMTP sender
// does not speak SMTPUTF8, and Unicode would let two different strings
// name one mailbox (composed and decomposed accents) or look alike
// (invisible characters), and case-folding would map some letters to other
// mailboxes' ASCII. The domain must be a DNS name, an internationalised one
// in its xn-- form. The error wraps [ErrBadEmail].
func NormalizeEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: empty", ErrBadEmail)
	}
	if len(s) > 254 {
		return "", fmt.Errorf("%w: longer than 254 characters", ErrBadEmail)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("%w: %q holds a character other than printable ASCII", ErrBadEmail, s)
		}
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return "", fmt.Errorf("%w: %q", ErrBadEmail, s)
	}
	local, domain, _ := strings.Cut(strings.ToLower(a.Address), "@")
	if len(local) > 64 {
		return "", fmt.Errorf("%w: local part longer than 64 characters", ErrBadEmail)
	}
	if !dnsName(domain) {
		return "", fmt.Errorf("%w: %q is not a mail domain", ErrBadEmail, domain)
	}
	return local + "@" + domain, nil
}

// dnsName reports whether d is a DNS name of two labels or more, each of
// ASCII letters, digits and inner hyphens, under a top-level label that a
// top-level domain can have: letters, or an internationalised one
// (xn--...). So no IP address passes, in any spelling a resolver takes
// (127.0.0.1, 127.1, 2130706433, 0x7f.0x0.0x0.0x1, [::1]), nor a name of one
// label (localhost) that only a local resolver knows, nor a name under a
// special-use top-level name (evil.localhost, printer.local).
func dnsName(d string) bool {
	labels := strings.Split(d, ".")
	if len(labels) < 2 || len(d) > 253 || !topLevel(labels[len(labels)-1]) {
		return false
	}
	for _, l := range labels {
		if len(l) < 1 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// specialUse are the top-level names that never reach a mailbox on the
// Internet: loopback (localhost, RFC 6761), local networks (local, internal,
// home.arpa), names that must not resolve (invalid, onion, alt) and the
// reverse lookups of addresses (arpa).
var specialUse = map[string]bool{
	"localhost": true, "local": true, "internal": true, "invalid": true,
	"onion": true, "alt": true, "arpa": true,
}

// topLevel reports whether l is a top-level label: two letters or more, or
// xn-- and the punycode of an internationalised one, and none of
// [specialUse].
func topLevel(l string) bool {
	if specialUse[l] {
		return false
	}
	if rest, ok := strings.CutPrefix(l, "xn--"); ok {
		return rest != ""
	}
	if len(l) < 2 {
		return false
	}
	for i := 0; i < len(l); i++ {
		if l[i] < 'a' || l[i] > 'z' {
			return false
		}
	}
	return true
}
