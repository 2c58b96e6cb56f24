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
// addresses are compared and stored. The error wraps [ErrBadEmail].
func NormalizeEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: empty", ErrBadEmail)
	}
	if len(s) > 254 {
		return "", fmt.Errorf("%w: longer than 254 characters", ErrBadEmail)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return "", fmt.Errorf("%w: %q", ErrBadEmail, s)
	}
	local, domain, _ := strings.Cut(strings.ToLower(a.Address), "@")
	switch {
	case len(local) > 64:
		return "", fmt.Errorf("%w: local part longer than 64 characters", ErrBadEmail)
	case !strings.Contains(domain, ".") || strings.HasPrefix(domain, "[") ||
		strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.Contains(domain, ".."):
		return "", fmt.Errorf("%w: %q is not a mail domain", ErrBadEmail, domain)
	}
	for _, r := range local + domain {
		if r < 0x21 || r == 0x7f {
			return "", fmt.Errorf("%w: %q", ErrBadEmail, s)
		}
	}
	return local + "@" + domain, nil
}
