package mail_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// consoleHandlers returns the handlers of a sender, with a log of their
// own, at Debug, kept in logs.
func consoleHandlers(t *testing.T, s mail.Sender, logs *bytes.Buffer) map[string]outbox.Handler {
	t.Helper()
	handlers, err := mail.Handlers(s, mail.Config{
		From: "accounts@accounts.test", Domain: "accounts.test",
		Now: func() time.Time { return now },
		Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return handlers
}

// Console prints each mail, link and code, to its terminal; the log says
// only that a mail went, by its IDs.
func TestConsolePrintsTheMailAndLogsNoneOfIt(t *testing.T) {
	t.Parallel()
	var screen, logs bytes.Buffer
	handlers := consoleHandlers(t, &mail.Console{Out: &screen}, &logs)
	link := mail.Link{To: "ada.console@example.com", URL: "http://accounts.test/sign-in?code=abc234", Code: "abc234", ExpiresAt: now.Add(time.Minute)}
	m := message(t, mail.TopicLoginLink, link)
	if err := handlers[mail.TopicLoginLink](context.Background(), m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"to ada.console@example.com", "Subject: Your sign-in link", "\n" + link.URL + "\n", "\nabc234\n", "Message-ID: " + m.ID.String() + "@accounts.test"} {
		if !strings.Contains(screen.String(), want) {
			t.Errorf("the console lacks %q:\n%s", want, screen.String())
		}
	}
	if !strings.Contains(logs.String(), `"msg":"mail: printed"`) || strings.Contains(logs.String(), "delivered") {
		t.Errorf("the log does not say that the mail was printed, or says it was delivered:\n%s", logs.String())
	}
	for _, secret := range []string{"ada.console", "abc234"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs.String())
		}
	}
}
