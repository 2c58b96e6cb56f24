package user

import (
	"strings"
	"unicode/utf8"
)

// MaskAddress returns address partly masked, for a mail that names an
// address to someone who may not own it: the first character of the local
// part and of the domain, and the domain's last label, such as
// "a***@e***.com" for "ada@example.com".
func MaskAddress(address string) string {
	local, domain, ok := strings.Cut(address, "@")
	if !ok {
		return "***"
	}
	host, tld := domain, ""
	if i := strings.LastIndexByte(domain, '.'); i > 0 {
		host, tld = domain[:i], domain[i:]
	}
	return first(local) + "***@" + first(host) + "***" + tld
}

// first returns the first character of s.
func first(s string) string {
	_, n := utf8.DecodeRuneInString(s)
	return s[:n]
}
