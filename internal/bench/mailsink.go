package bench

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/eventsourced/accounts/internal/smtp/mailbox"
)

// MailSink is an SMTP server on loopback (package mailbox) for the relay
// of a benchmark to deliver to: it hands each mail to the round that
// waits for mail to its recipient, and counts the others. It runs in the
// benchmark's process, so the figures hold its share of the machine, as
// they hold the clients'.
type MailSink struct {
	// URL is the SMTP_URL of the sink.
	URL string

	srv     *mailbox.Server
	ln      net.Listener
	served  chan struct{}
	mu      sync.Mutex
	waiting map[string]chan mailbox.Message
	stray   atomic.Int64
}

// StartMailSink starts a sink on a free port of loopback.
func StartMailSink() (*MailSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: mail sink: %w", err)
	}
	s := &MailSink{URL: "smtp://" + ln.Addr().String(), ln: ln, served: make(chan struct{}),
		waiting: map[string]chan mailbox.Message{}}
	s.srv = mailbox.New(s.deliver)
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// expect returns a channel on which the sink hands over the mails to the
// address to, up to mails of them, until [MailSink.forget]; one more is
// stray. Call it before what sends the mail.
func (s *MailSink) expect(to string, mails int) <-chan mailbox.Message {
	c := make(chan mailbox.Message, mails)
	s.mu.Lock()
	s.waiting[to] = c
	s.mu.Unlock()
	return c
}

// forget stops waiting for mail to the address to.
func (s *MailSink) forget(to string) {
	s.mu.Lock()
	delete(s.waiting, to)
	s.mu.Unlock()
}

// deliver hands m to the round that waits for it, or counts it as stray:
// a mail nobody waits for, or one more than expected.
func (s *MailSink) deliver(m mailbox.Message) {
	if len(m.To) != 1 {
		s.stray.Add(1)
		return
	}
	s.mu.Lock()
	c := s.waiting[m.To[0]]
	s.mu.Unlock()
	select {
	case c <- m: // A nil c blocks, and the default takes it.
	default:
		s.stray.Add(1)
	}
}

// Stray returns how many mails came that no round waited for.
func (s *MailSink) Stray() int64 { return s.stray.Load() }

// Close stops the sink and waits until it has.
func (s *MailSink) Close() error {
	err := s.srv.Close()
	// Closing the listener stops a server that had not started serving
	// when Close came.
	_ = s.ln.Close()
	<-s.served
	return err
}
