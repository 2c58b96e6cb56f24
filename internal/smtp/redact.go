package smtp

import "regexp"

// addressLike matches anything shaped like an email address.
var addressLike = regexp.MustCompile(`[^\s<>"'(),;:@\[\]]+@[^\s<>"'(),;:@\[\]]+`)

// redacted is an error whose text keeps no address. A server's reply, and
// go-mail's own error text, can quote the recipient ("550 <ann@example.com>
// unknown"), and an error's text ends up in logs and in a buried message's
// stored reason, which an erasure does not reach. The error it wraps stays
// reachable through errors.Is and errors.As.
type redacted struct{ err error }

func (r redacted) Error() string { return addressLike.ReplaceAllString(r.err.Error(), "[address]") }

func (r redacted) Unwrap() error { return r.err }
