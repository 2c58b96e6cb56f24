package smtptest

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/smtp/mailbox"
)

// Message is one mail the server accepted, decoded.
type Message = mailbox.Message

// Server is an SMTP server for one test.
type Server struct {
	addr     string
	mu       sync.Mutex
	box      *mailbox.Server
	listener net.Listener
	received []Message
	refuse   struct {
		code int
		text string
	}
	arrived chan struct{}
	hold    *hold
}

// hold keeps mails from being answered until they are let through.
type hold struct {
	held    chan struct{}
	permits chan struct{}
	all     chan struct{}
	once    sync.Once
}

// NewServer starts a server on 127.0.0.1 and stops it when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{arrived: make(chan struct{}, 1000)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("smtptest: %v", err)
	}
	s.addr = l.Addr().String()
	s.serve(l)
	t.Cleanup(s.Stop)
	return s
}

// serve serves l with a new mailbox server.
func (s *Server) serve(l net.Listener) {
	box := mailbox.New(func(m Message) {
		s.mu.Lock()
		h := s.hold
		s.mu.Unlock()
		if h != nil {
			h.held <- struct{}{}
			select {
			case <-h.permits:
			case <-h.all:
			}
		}
		s.mu.Lock()
		s.received = append(s.received, m)
		s.mu.Unlock()
		s.arrived <- struct{}{}
	})
	s.mu.Lock()
	box.Refuse(s.refuse.code, s.refuse.text)
	s.box, s.listener = box, l
	s.mu.Unlock()
	go func() { _ = box.Serve(l) }()
}

// Hold makes the server keep each mail it receives from here on, before it
// answers the end of its data, until [Server.Release] or
// [Server.ReleaseAll] lets it through: the sender's delivery is then in
// flight for as long as the test wants. [Server.Held] tells of each mail
// held.
func (s *Server) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		s.hold = &hold{held: make(chan struct{}, 1000), permits: make(chan struct{}, 1000), all: make(chan struct{})}
	}
}

// Held receives once for each mail held since [Server.Hold].
func (s *Server) Held() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		return nil
	}
	return s.hold.held
}

// Release lets n held mails through, now or as they arrive: each is then
// kept and answered as accepted.
func (s *Server) Release(n int) {
	s.mu.Lock()
	h := s.hold
	s.mu.Unlock()
	for range n {
		if h != nil {
			h.permits <- struct{}{}
		}
	}
}

// ReleaseAll lets every mail held through, and every later one: the
// server holds nothing more.
func (s *Server) ReleaseAll() {
	s.mu.Lock()
	h := s.hold
	s.hold = nil
	s.mu.Unlock()
	if h != nil {
		h.once.Do(func() { close(h.all) })
	}
}

// Stop stops the server: connections to its address are refused until
// Start. Held mails are let through first.
func (s *Server) Stop() {
	s.ReleaseAll()
	s.mu.Lock()
	box, l := s.box, s.listener
	s.box, s.listener = nil, nil
	s.mu.Unlock()
	if box != nil {
		// Closing the listener first stops a Serve that has not yet
		// started, which Close alone would miss.
		_ = l.Close()
		_ = box.Close()
	}
}

// Start serves again on the address of a stopped server.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		t.Fatalf("smtptest: listen again on %s: %v", s.addr, err)
	}
	s.serve(l)
}

// URL returns the server's address as an SMTP_URL.
func (s *Server) URL() string { return "smtp://" + s.addr }

// Refuse makes the server answer every recipient with code and text; code
// 0 makes it accept mail again.
func (s *Server) Refuse(code int, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse.code, s.refuse.text = code, text
	if s.box != nil {
		s.box.Refuse(code, text)
	}
}

// Messages returns what the server has accepted so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.received...)
}

// Arrived receives, at most once per mail, when mails have arrived.
func (s *Server) Arrived() <-chan struct{} { return s.arrived }

// Wait returns the first n messages once they have arrived, failing t after
// timeout.
func (s *Server) Wait(t testing.TB, n int, timeout time.Duration) []Message {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if got := s.Messages(); len(got) >= n {
			return got[:n]
		}
		select {
		case <-s.arrived:
		case <-deadline:
			t.Fatalf("smtptest: %d of %d messages arrived within %s", len(s.Messages()), n, timeout)
		}
	}
}
