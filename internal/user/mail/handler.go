package mail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"strings"
	texttemplate "text/template"
	"time"
	"unicode"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/outbox"
)

// Mail is one composed message.
type Mail struct {
	From, To, Subject string
	// MessageID is the Message-ID header without angle brackets,
	// "ID@DOMAIN": a resend of one outbox message carries the same one.
	MessageID string
	Text      string
	HTML      string
}

// Sender sends composed mail, over SMTP or to a terminal ([Console]).
type Sender interface {
	Send(ctx context.Context, m Mail) error
}

// ErrRefused, wrapped in a [Sender]'s error, says that no mail to the
// recipient can ever be sent: its server has no such mailbox, or the
// recipient is no address. The handlers fail such a mail as
// [outbox.ErrPermanent].
var ErrRefused = errors.New("mail: recipient refused for good")

// Config is what the handlers need besides a sender.
type Config struct {
	// From is the sender address.
	From string
	// Domain is the right-hand side of each Message-ID.
	Domain string
	// Now tells the time, to drop links that expired before delivery; nil
	// means time.Now.
	Now func() time.Time
	// Log receives a line for each mail delivered and each dropped link;
	// nil discards them.
	Log *slog.Logger
	// Meter counts dropped links as mail.dropped, and mail held back by
	// the budget as mail.held_back; nil counts nothing.
	Meter metric.Meter
	// Budget caps the mail that each mailbox receives ([Budget]); nil
	// sends every mail.
	Budget *Budget
}

// Handlers returns the outbox handlers of this package's topics, which
// compose each mail and send it through s.
//
// A link that expired before its message was delivered is dropped rather
// than sent, since it would only fail: the handler acknowledges it, counts
// it and logs it; so is one whose code the sweep redacted. Then the mail
// spends its recipient's budget, when there is one, and a mail held back
// by it is acknowledged, counted and logged, by its topic and message ID
// alone, without being sent. Delivery is at least once; the Message-ID
// taken from the outbox message's ID lets a mail system recognise a
// resend.
func Handlers(s Sender, cfg Config) (map[string]outbox.Handler, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	// A mail printed on a terminal was not delivered: the log says which.
	sent := "mail: delivered"
	if _, ok := s.(*Console); ok {
		sent = "mail: printed"
	}
	var dropped, heldBack metric.Int64Counter
	if cfg.Meter != nil {
		var err error
		dropped, err = cfg.Meter.Int64Counter("mail.dropped",
			metric.WithDescription("Links not mailed because they expired before delivery."),
			metric.WithUnit("{message}"))
		if err != nil {
			return nil, fmt.Errorf("mail: metrics: %w", err)
		}
		heldBack, err = cfg.Meter.Int64Counter("mail.held_back",
			metric.WithDescription("Mails not sent because their mailbox's budget was spent."),
			metric.WithUnit("{message}"))
		if err != nil {
			return nil, fmt.Errorf("mail: metrics: %w", err)
		}
		// At 0 from the start, so that an alert on its increase sees the
		// first after a restart.
		for _, topic := range Topics {
			heldBack.Add(context.Background(), 0, metric.WithAttributes(attribute.String("topic", topic)))
		}
	}
	h := func(topic string, l letter) outbox.Handler {
		return func(ctx context.Context, m outbox.Message) error {
			var link Link
			if err := json.Unmarshal(m.Payload, &link); err != nil {
				// No later try reads it better.
				return fmt.Errorf("mail: %s %s: decode: %w: %w", topic, m.ID, outbox.ErrPermanent, err)
			}
			// User input, such as an organization's name, is shown as
			// one line of plain text, whatever the payload holds.
			link.Organization = plainLine(link.Organization)
			if topic != TopicEmailTaken && link.Code == "" {
				// The sweep redacted a buried message, whose link had
				// expired by its clock; a requeue must not send an empty one.
				cfg.Log.InfoContext(ctx, "mail: link redacted, dropped", "topic", topic, "id", m.ID)
				if dropped != nil {
					dropped.Add(ctx, 1, metric.WithAttributes(attribute.String("topic", topic)))
				}
				return nil
			}
			if !cfg.Now().Before(link.ExpiresAt) {
				cfg.Log.InfoContext(ctx, "mail: link expired before delivery, dropped",
					"topic", topic, "id", m.ID, "expired_at", link.ExpiresAt)
				if dropped != nil {
					dropped.Add(ctx, 1, metric.WithAttributes(attribute.String("topic", topic)))
				}
				return nil
			}
			if cfg.Budget != nil {
				send, err := cfg.Budget.Spend(ctx, link.To, m.ID, !neverHeld[topic])
				if err != nil {
					return err // Retried: a mail goes only once it has spent.
				}
				if !send {
					// Never the address: the log outlives the message.
					cfg.Log.InfoContext(ctx, "mail: held back, the mailbox's budget is spent", "topic", topic, "id", m.ID)
					trace.SpanFromContext(ctx).AddEvent("mail.held_back")
					if heldBack != nil {
						heldBack.Add(ctx, 1, metric.WithAttributes(attribute.String("topic", topic)))
					}
					return nil
				}
			}
			var text, html bytes.Buffer
			if err := l.text.Execute(&text, link); err != nil {
				return fmt.Errorf("mail: %s %s: compose: %w", topic, m.ID, err)
			}
			if err := l.html.Execute(&html, link); err != nil {
				return fmt.Errorf("mail: %s %s: compose: %w", topic, m.ID, err)
			}
			msgID := m.ID.String() + "@" + cfg.Domain
			if err := s.Send(ctx, Mail{
				From:      cfg.From,
				To:        link.To,
				Subject:   l.subject,
				MessageID: msgID,
				Text:      text.String(),
				HTML:      html.String(),
			}); err != nil {
				if errors.Is(err, ErrRefused) {
					return fmt.Errorf("%w: %w", outbox.ErrPermanent, err)
				}
				return err
			}
			// Never the link or the code: the log outlives the message.
			cfg.Log.InfoContext(ctx, sent, "topic", topic, "id", m.ID, "message_id", msgID, "attempts", m.Attempts)
			return nil
		}
	}
	return map[string]outbox.Handler{
		TopicLoginLink:     h(TopicLoginLink, loginLink),
		TopicEmailChange:   h(TopicEmailChange, emailChange),
		TopicEmailTaken:    h(TopicEmailTaken, emailTaken),
		TopicEmailChanged:  h(TopicEmailChanged, emailChanged),
		TopicOrgInvitation: h(TopicOrgInvitation, orgInvitation),
	}, nil
}

// letter is the text of one kind of mail, in plain text and HTML, with the
// link and the code each on a line of its own.
type letter struct {
	subject string
	text    *texttemplate.Template
	html    *template.Template
}

func newLetter(subject, intro, ignore string) letter {
	const expiry = `{{.ExpiresAt.UTC.Format "2006-01-02 15:04 UTC"}}`
	return letter{
		subject: subject,
		text: texttemplate.Must(texttemplate.New("text").Parse(intro + `

{{.URL}}

Or enter this code:

{{.Code}}

The link works once and expires at ` + expiry + `.
` + ignore + `
`)),
		html: template.Must(template.New("html").Parse(`<!doctype html>
<p>` + intro + `</p>
<p><a href="{{.URL}}">{{.URL}}</a></p>
<p>Or enter this code:</p>
<p><code>{{.Code}}</code></p>
<p>The link works once and expires at ` + expiry + `.<br>
` + ignore + `</p>
`)),
	}
}

var (
	loginLink = newLetter("Your sign-in link",
		"Sign in with this link:",
		"If you did not ask to sign in, ignore this mail.")
	emailChange = newLetter("Confirm your new email address",
		"Confirm that this is your new email address:",
		"If you did not ask to change your address, ignore this mail.")
	emailChanged = newLetter("Your email address was changed",
		"The email address of your account was changed to {{.NewAddress}}. If it was you, there is nothing to do. If it was not, undo the change with this link: it moves the account back to this address and signs everyone out.",
		"If you changed it yourself, ignore this mail.")
	// The subject is the same for every invitation, so that no name
	// that someone chose reaches a header.
	orgInvitation = newLetter("You are invited to join an organization",
		"An owner of the organization “{{.Organization}}” invited {{.To}} to join it. Accept the invitation with this link, signed in with this address:",
		"If you did not expect this invitation, ignore this mail: nothing changes unless it is accepted.")
	emailTaken = newNotice("Your email address was given for another account",
		"Someone signed in to an account asked to change its address to this one. This address has an account of its own already, so nothing was changed.",
		"If it was you, sign in with this address to reach that account. If not, ignore this mail.")
)

// plainLine returns s as one line of plain text for a letter: its invalid
// bytes, and each character that could break the line or stand for what
// it is not (a control, a line or paragraph separator, a private or
// unassigned code point), become U+FFFD, and the invisible format
// characters (bidirectional overrides, zero-width spaces), which could
// make the text around them read otherwise, go; but the zero-width
// joiner, which joins emoji and cannot reorder anything. The HTML part
// escapes what is left.
func plainLine(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == zeroWidthJoiner || unicode.IsGraphic(r):
			return r
		case unicode.Is(unicode.Cf, r):
			return -1
		default:
			return unicode.ReplacementChar
		}
	}, strings.ToValidUTF8(s, string(unicode.ReplacementChar)))
}

// zeroWidthJoiner joins emoji into one ("👩‍💻").
const zeroWidthJoiner = '\u200d'

// newNotice returns a letter that says something and carries no link.
func newNotice(subject, what, next string) letter {
	return letter{
		subject: subject,
		text:    texttemplate.Must(texttemplate.New("text").Parse(what + "\n\n" + next + "\n")),
		html:    template.Must(template.New("html").Parse("<!doctype html>\n<p>" + what + "</p>\n<p>" + next + "</p>\n")),
	}
}
