package redact

import "regexp"

// addressLike matches anything shaped like an email address.
var addressLike = regexp.MustCompile(`[^\s<>"'(),;:@\[\]\\]+@[^\s<>"'(),;:@\[\]\\]+`)

// Addresses returns s with everything shaped like an email address in it
// replaced by "[address]".
func Addresses(s string) string { return addressLike.ReplaceAllString(s, "[address]") }
