// Package smtptest runs a real SMTP server (emersion/go-smtp) on loopback
// for tests, keeps what it receives, and can be told to refuse mail or be
// stopped and started again.
package smtptest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// Message is one mail the server accepted, decoded.
type Message struct {
	From   string
	To     []string
	Header netmail.Header
	// Text and HTML are the decoded bodies of the text/plain and text/html
	// parts.
	Text, HTML string
}

// Server is an SMTP server for one test.
type Server struct {
	addr     string
	mu       sync.Mutex
	srv      *smtp.Server
	listener net.Listener
	received []Message
	refuse   *smtp.SMTPError
	arrived  chan struct{}
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

// serve serves l with a new go-smtp server.
func (s *Server) serve(l net.Listener) {
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &session{s: s}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	s.mu.Lock()
	s.srv, s.listener = srv, l
	s.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

// Stop stops the server: connections to its address are refused until
// Start.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, l := s.srv, s.listener
	s.srv, s.listener = nil, nil
	s.mu.Unlock()
	if srv != nil {
		// Closing the listener first stops a Serve that has not yet
		// started, which Close alone would miss.
		_ = l.Close()
		_ = srv.Close()
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
	if code == 0 {
		s.refuse = nil
		return
	}
	s.refuse = &smtp.SMTPError{Code: code, EnhancedCode: smtp.NoEnhancedCode, Message: text}
}

// Messages returns what the server has accepted so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.received...)
}

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

type session struct {
	s    *Server
	from string
	to   []string
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	x.from = from
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.s.mu.Lock()
	refuse := x.s.refuse
	x.s.mu.Unlock()
	if refuse != nil {
		return refuse
	}
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m, err := parse(raw)
	if err != nil {
		return &smtp.SMTPError{Code: 554, Message: "smtptest: " + err.Error()}
	}
	m.From, m.To = x.from, x.to
	x.s.mu.Lock()
	x.s.received = append(x.s.received, m)
	x.s.mu.Unlock()
	x.s.arrived <- struct{}{}
	return nil
}

// parse decodes a message's text and HTML parts, whether it is a single
// part or multipart.
func parse(raw []byte) (Message, error) {
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Message{}, err
	}
	m := Message{Header: msg.Header}
	err = walk(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body, &m)
	return m, err
}

func walk(contentType, encoding string, body io.Reader, m *Message) error {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("content type %q: %w", contentType, err)
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := walk(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p, m); err != nil {
				return err
			}
		}
	}
	if strings.EqualFold(encoding, "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	switch mediaType {
	case "text/plain":
		m.Text = string(b)
	case "text/html":
		m.HTML = string(b)
	}
	return nil
}
