package smtp

import (
	"errors"
	"strings"

	"github.com/eventsourced/accounts/internal/redact"
)

// redacted is an error whose text keeps no address. A server's reply, and
// go-mail's own error text, can quote the recipient ("550 <ann@example.com>
// unknown"), and an error's text ends up in logs and in a buried message's
// stored reason, which an erasure does not reach. The error it wraps stays
// reachable through errors.Is and errors.As.
//
// A server may also quote the recipient's mailbox without its domain
// ("user ann.b unknown"), so the local part of the recipient goes too.
//
// The mail's own Message-ID, which is shaped like an address
// (ID@MAIL_DOMAIN) and names no one, is kept: go-mail repeats it ("affected
// message ID"), and an operator follows a mail by it.
type redacted struct {
	err       error
	messageID string
	// local is the part of the recipient's address before its @.
	local string
}

func (r redacted) Error() string {
	text := r.err.Error()
	clean := func(s string) string { return redact.LocalPart(redact.Addresses(s), r.local) }
	if r.messageID == "" {
		return clean(text)
	}
	// The parts around each Message-ID are redacted, the IDs kept.
	parts := strings.Split(text, r.messageID)
	for i, p := range parts {
		parts[i] = clean(p)
	}
	return strings.Join(parts, r.messageID)
}

func (r redacted) Unwrap() error { return r.err }

// unparsed is what a send's error says of a recipient that does not parse,
// instead of go-mail's and net/mail's errors: go-mail quotes the address,
// which may be all but well-formed ("ann@@example.com") and so escape
// [redacted], and net/mail's can quote the rest of it ("expected single
// address, got ...").
var unparsed = errors.New("it does not parse")
