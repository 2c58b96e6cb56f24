package mail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Console is the sender of a person trying the service on their own
// machine with no mail server: it prints each mail, its text part with the
// link and the code, to Out, which must be a terminal and never the log.
// A log is kept, shipped and searched, and a code in it signs its reader
// in; a terminal's screen is read by the person at it and kept by no one.
// Safe for concurrent use.
type Console struct {
	Out io.Writer
	mu  sync.Mutex
}

var _ Sender = (*Console)(nil)

// Send prints m to c.Out as `app devmail` prints the mails it catches.
func (c *Console) Send(_ context.Context, m Mail) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := fmt.Fprintf(c.Out, "--- mail from %s to %s (not sent: SMTP_URL is unset)\nSubject: %s\nMessage-ID: %s\n\n%s\n",
		m.From, m.To, m.Subject, m.MessageID, m.Text); err != nil {
		return fmt.Errorf("mail: print %s: %w", m.MessageID, err)
	}
	return nil
}

// ErrNoMailServer is the error of every send of [Unsent].
var ErrNoMailServer = errors.New("mail: not sent: SMTP_URL is unset and there is no terminal to print it on")

// Unsent is the sender when there is neither a mail server nor a terminal
// to print mail on: each send fails with [ErrNoMailServer], so the message
// is retried and then buried, kept for an operator to requeue once a mail
// server is set, and never printed where a log collector would keep it.
type Unsent struct{}

var _ Sender = Unsent{}

// Send fails.
func (Unsent) Send(context.Context, Mail) error { return ErrNoMailServer }
