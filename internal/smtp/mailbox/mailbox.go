package mailbox

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

// Server serves SMTP on a listener and hands each accepted mail to
// Deliver. It takes any sender and recipient, without authentication or
// TLS: it is for loopback only.
type Server struct {
	deliver func(Message)
	mu      sync.Mutex
	srv     *smtp.Server
	refuse  *smtp.SMTPError
}

// New returns a server that calls deliver, from the connection's goroutine,
// for each mail accepted.
func New(deliver func(Message)) *Server { return &Server{deliver: deliver} }

// Serve serves l until [Server.Close]; it returns nil then.
func (s *Server) Serve(l net.Listener) error {
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &session{s: s}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	err := srv.Serve(l)
	if errors.Is(err, smtp.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close stops serving and closes the connections.
func (s *Server) Close() error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

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
		return &smtp.SMTPError{Code: 554, Message: "mailbox: " + err.Error()}
	}
	m.From, m.To = x.from, x.to
	x.s.deliver(m)
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
