package mail

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// Console is the sender of a person trying the service on their own
// machine with no mail server: it prints each mail, its text part with the
// link and the code, to Out, which must be that person's terminal: never
// the log, nor an operator's screen.
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
