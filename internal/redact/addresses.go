package redact

import "regexp"

// addressLike matches anything shaped like an email address.
var addressLike = regexp.MustCompile(`[^\s<>"'(),;:@\[\]\\]+@[^\s<>"'(),;:@\[\]\\]+`)

// Addresses returns s with everything shaped like an email address in it
// replaced by "[address]".
func Addresses(s string) string { return addressLike.ReplaceAllString(s, "[address]") }

// LocalPart returns s with local, the part of a person's address before
// its @, replaced by "[address]" wherever it stands as a word of its own,
// in any case: a mail server may quote the mailbox it refused without its
// domain ("user ann.b unknown"). A word ends at a character that cannot be
// part of a local part. An empty local leaves s as it is.
func LocalPart(s, local string) string {
	if local == "" {
		return s
	}
	word := regexp.MustCompile(`(?i)(^|[^A-Za-z0-9!#$%&'*+/=?^_{|}~.-])` + regexp.QuoteMeta(local) + `([^A-Za-z0-9!#$%&'*+/=?^_{|}~.-]|$)`)
	// A match takes the character after the word, which may begin the
	// next occurrence: replace until none is left.
	for {
		next := word.ReplaceAllString(s, "${1}[address]${2}")
		if next == s {
			return s
		}
		s = next
	}
}
