package smtp

import (
	"context"
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// Sender is a [mail.Sender] over SMTP. It opens a connection per mail, so it
// is safe for concurrent use.
type Sender struct {
	host string
	opts []gomail.Option
	// plain is an smtp:// sender, whose connections Send dials itself.
	plain bool
	port  int
	tr    trace.Tracer
}

var _ mail.Sender = (*Sender)(nil)

// New returns a sender for rawURL, smtp://[user:pass@]host[:port] (STARTTLS
// when offered, port 587 by default) or smtps://[user:pass@]host[:port]
// (implicit TLS, port 465 by default). Each connection and command waits at
// most timeout.
func New(rawURL string, timeout time.Duration, with ...Option) (*Sender, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the URL, password and all; keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("smtp: SMTP_URL is not a URL: %w", err)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("smtp: SMTP_URL %q has no host", u.Redacted())
	}
	opts := []gomail.Option{gomail.WithTimeout(timeout)}
	port := 587
	switch u.Scheme {
	case "smtp":
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	case "smtps":
		opts = append(opts, gomail.WithSSL())
		port = 465
	default:
		return nil, fmt.Errorf("smtp: SMTP_URL %q: scheme must be smtp or smtps", u.Redacted())
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("smtp: SMTP_URL %q: bad port", u.Redacted())
		}
	}
	opts = append(opts, gomail.WithPort(port))
	if u.User != nil {
		pass, _ := u.User.Password()
		opts = append(opts,
			gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(u.User.Username()),
			gomail.WithPassword(pass))
	}
	var o options
	for _, opt := range with {
		opt(&o)
	}
	return &Sender{host: u.Hostname(), opts: opts, plain: u.Scheme == "smtp", port: port, tr: o.tracer()}, nil
}

// Send delivers m. Its error wraps [mail.ErrRefused] when the server
// refused the recipient for good, and [outbox.ErrUnreachable] when the
// server could not be reached at all: the connection was refused or timed
// out, its name did not resolve, or it stopped answering within the
// timeout. A refusal of the server's own (a 4xx or 5xx reply) wraps
// neither. Over smtp:// the end of ctx ends the exchange at once,
// whatever step it is at, so that a stopping relay can release the
// message; go-mail heeds ctx only while it connects. Over smtps:// (where
// go-mail's own TLS dialer must be kept for it to offer plain-text
// authentication) a step that has begun waits up to the timeout.
//
// When ctx carries a valid span context, the send is a client span, a
// child of it, that names the server alone: no address, subject or body,
// and of a failure its type, not its text. The mail carries nothing of
// the trace.
func (s *Sender) Send(ctx context.Context, m mail.Mail) (err error) {
	ctx, end := s.startSpan(ctx)
	defer func() { end(err) }()
	msg := gomail.NewMsg()
	if err := msg.From(m.From); err != nil {
		return fmt.Errorf("smtp: from %q: %w", m.From, err)
	}
	if err := msg.To(m.To); err != nil {
		return fmt.Errorf("smtp: send %s: %w: the recipient is no address: %w", m.MessageID, mail.ErrRefused, unparsed)
	}
	msg.Subject(m.Subject)
	msg.SetMessageIDWithValue(m.MessageID)
	msg.SetDate()
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	opts := s.opts
	if s.plain {
		var d net.Dialer
		opts = append(opts[:len(opts):len(opts)], gomail.WithDialContextFunc(func(dctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(dctx, network, addr)
			if err != nil {
				return nil, err
			}
			return newStopConn(ctx, conn), nil
		}))
	}
	client, err := gomail.NewClient(s.host, opts...)
	if err != nil {
		return fmt.Errorf("smtp: client: %w", err)
	}
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		if ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
		err = redacted{err: err, messageID: m.MessageID, local: localPart(m.To)}
		if refusedForGood(err) {
			return fmt.Errorf("smtp: send %s: %w: %w", m.MessageID, mail.ErrRefused, err)
		}
		// A server that cannot be reached (refused, timed out, a name that
		// does not resolve) is down for every mail, not for this one.
		return fmt.Errorf("smtp: send %s: %w", m.MessageID, outbox.Unreachable(err))
	}
	return nil
}

// refusedForGood reports whether err, of a send, is the server's
// refusal of the recipient for good ([mail.ErrRefused]): a 5xx reply to
// RCPT TO whose enhanced status code says the mailbox does not exist or
// cannot be addressed (5.1.1, 5.1.2, 5.1.3, 5.1.6 or 5.1.10). The code is
// read from the reply's text when go-mail has none: it reads codes only
// from a server that announces them. Other refusals speak of this
// service's account or configuration, which an operator mends: "5.7.1
// relaying denied", a sender refused at RCPT TO (5.1.0, 5.1.7, 5.1.8), a
// reply with no code at all. Their mails are tried again.
func refusedForGood(err error) bool {
	var se *gomail.SendError
	if !errors.As(err, &se) || se.Reason != gomail.ErrSMTPRcptTo || se.IsTemp() || se.ErrorCode()/100 != 5 {
		return false
	}
	code := se.EnhancedStatusCode()
	if code == "" {
		// The server's reply, without the recipients go-mail lists after it.
		reply, _, _ := strings.Cut(se.Error(), ", affected recipient(s):")
		code = enhancedCode.FindString(reply)
	}
	switch code {
	case "5.1.1", "5.1.2", "5.1.3", "5.1.6", "5.1.10":
		return true
	}
	return false
}

// enhancedCode finds a permanent enhanced status code (RFC 3463) in a
// reply's text.
var enhancedCode = regexp.MustCompile(`\b5\.\d{1,3}\.\d{1,3}\b`)

// stopConn is a connection whose reads and writes fail at once past the
// end of its context, whatever deadlines are set on it: go-mail sets one
// before each step.
type stopConn struct {
	net.Conn
	ctx  context.Context
	mu   sync.Mutex
	stop func() bool
}

func newStopConn(ctx context.Context, conn net.Conn) *stopConn {
	c := &stopConn{Conn: conn, ctx: ctx}
	c.stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Time{}) })
	return c
}

// deadline returns t, or now once the context has ended.
func (c *stopConn) deadline(t time.Time) time.Time {
	if c.ctx.Err() != nil {
		return time.Now()
	}
	return t
}

func (c *stopConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetDeadline(c.deadline(t))
}

func (c *stopConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetReadDeadline(c.deadline(t))
}

func (c *stopConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetWriteDeadline(c.deadline(t))
}

func (c *stopConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// localPart returns the part of address before its last @, or "" when it
// has none.
func localPart(address string) string {
	if a, err := netmail.ParseAddress(address); err == nil {
		address = a.Address
	}
	at := strings.LastIndexByte(address, '@')
	if at < 0 {
		return ""
	}
	return address[:at]
}
