package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// `app outbox drain` delivers only what its configuration can deliver:
// mail through SMTP_URL alone, never printed on the operator's terminal,
// and integration events only to the destinations it has. It leaves the
// rest in the outbox as it was, on both backends.
func TestOutboxDrainClaimsOnlyWhatItCanDeliver(t *testing.T) {
	t.Parallel()
	for name, newURL := range testDatabases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"DATABASE_URL": newURL(t), "DATA_KEY": testDataKey}
			const code = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
			signIn := newMessage(t, mail.TopicLoginLink, mail.Link{
				To: "ada.drain@example.com", URL: "http://accounts.test/sign-in?code=" + code, Code: code,
				ExpiresAt: time.Now().Add(time.Hour),
			})
			event := newMessage(t, publish.Topic(publish.Webhook, "user.registered"), map[string]string{"id": "e1"})
			event.Key = "webhook:user-1"
			db := openTestDB(t, env)
			if err := db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
				return db.Outbox().Add(ctx, tx, signIn, event)
			}); err != nil {
				t.Fatal(err)
			}
			untouched := func(when string, msgs ...outbox.Message) {
				t.Helper()
				for _, m := range msgs {
					rec, err := db.Outbox().Lookup(t.Context(), m.ID)
					if err != nil {
						t.Fatalf("%s: %s: %v", when, m.Topic, err)
					}
					if rec.Attempts != 0 || !rec.BuriedAt.IsZero() || rec.LastError != "" {
						t.Errorf("%s: %s has %d attempts, buried %s, last error %q; want it untouched",
							when, m.Topic, rec.Attempts, rec.BuriedAt, rec.LastError)
					}
				}
			}

			// On the operator's terminal, without SMTP_URL: nothing is
			// printed of the mail, and nothing is claimed.
			screen := openTerminal(t)
			var stderr bytes.Buffer
			if err := run(t.Context(), []string{"outbox", "drain"}, getenv(env), screen.TTY, &stderr); err != nil {
				t.Fatalf("outbox drain: %v\n%s", err, stderr.String())
			}
			awaitOnScreen(t, screen, "claimed ")
			if got := screen.String(); !strings.Contains(got, "claimed 0, delivered 0, retried 0, buried 0") ||
				strings.Contains(got, code) || strings.Contains(got, "ada.drain") {
				t.Errorf("the operator's terminal shows:\n%s\nwant nothing claimed and nothing of the mail", got)
			}
			if !strings.Contains(stderr.String(), "SMTP_URL is unset: mail is left in the outbox") {
				t.Errorf("stderr does not say why the mail stays:\n%s", stderr.String())
			}
			untouched("without SMTP_URL", signIn, event)

			// With SMTP_URL the mail is sent; the event, which has no
			// destination here, still waits.
			mx := smtptest.NewServer(t)
			env["SMTP_URL"] = mx.URL()
			out, err := runApp(t, t.Context(), env, "outbox", "drain")
			if err != nil || out != "claimed 1, delivered 1, retried 0, buried 0\n" {
				t.Fatalf("outbox drain with SMTP_URL: %q, %v; want the mail delivered", out, err)
			}
			if got := mx.Messages(); len(got) != 1 || !strings.Contains(got[0].Text, code) {
				t.Errorf("the mail server received %d mails, want the sign-in mail", len(got))
			}
			untouched("with SMTP_URL", event)
		})
	}
}

// newMessage returns a message of topic with payload, created now.
func newMessage(t *testing.T, topic string, payload any) outbox.Message {
	t.Helper()
	m, err := outbox.NewMessage(topic, payload, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// openTestDB opens and migrates the database of env, closed when t ends.
func openTestDB(t *testing.T, env map[string]string) backend.Backend {
	t.Helper()
	d, err := parseDatabaseURL(env["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	db, _, err := d.open(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// awaitOnScreen waits until the terminal shows want.
func awaitOnScreen(t *testing.T, screen *terminal, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(screen.String(), want) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the terminal does not show %q within 30s:\n%s", want, screen.String())
		}
	}
}
