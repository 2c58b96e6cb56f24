// Package smtp sends mail through an SMTP server, with wneessen/go-mail as
// the client: STARTTLS when the server offers it (or implicit TLS for
// smtps://), authentication when the URL carries a user, and a timeout on
// every exchange.
package smtp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/eventsourced/accounts/internal/user/mail"
)

// Sender is a [mail.Sender] over SMTP. It opens a connection per mail, so it
// is safe for concurrent use.
type Sender struct {
	host string
	opts []gomail.Option
}

var _ mail.Sender = (*Sender)(nil)

// New returns a sender for rawURL, smtp://[user:pass@]host[:port] (STARTTLS
// when offered, port 587 by default) or smtps://[user:pass@]host[:port]
// (implicit TLS, port 465 by default). Each connection and command waits at
// most timeout.
func New(rawURL string, timeout time.Duration) (*Sender, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the URL, password and all; keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("smtp: SMTP_URL is not a URL: %v", err)
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
	return &Sender{host: u.Hostname(), opts: opts}, nil
}

// Send delivers m.
func (s *Sender) Send(ctx context.Context, m mail.Mail) error {
	msg := gomail.NewMsg()
	if err := msg.From(m.From); err != nil {
		return fmt.Errorf("smtp: from %q: %w", m.From, err)
	}
	if err := msg.To(m.To); err != nil {
		return fmt.Errorf("smtp: to %q: %w", m.To, err)
	}
	msg.Subject(m.Subject)
	msg.SetMessageIDWithValue(m.MessageID)
	msg.SetDate()
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	client, err := gomail.NewClient(s.host, s.opts...)
	if err != nil {
		return fmt.Errorf("smtp: client: %w", err)
	}
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("smtp: send %s to %s: %w", m.MessageID, m.To, err)
	}
	return nil
}
