package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// TestServeSweepsWhatHasExpired: the running app deletes the rows of
// expired links, the codes of buried mails whose links expired (an
// invitation's after INVITATION_TTL, the undo link of a changed address
// after user.UndoTTL, every other's after LINK_TTL), and
// buried messages past OUTBOX_BURIED_RETENTION, at start and every
// SWEEP_INTERVAL, and keeps what is live.
func TestServeSweepsWhatHasExpired(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "accounts.db")
	db, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Links asked for two hours ago have expired; one asked for now lives.
	past := testclock.New(time.Now().Add(-2 * time.Hour))
	for _, clock := range []func() time.Time{past.Now, past.Now, time.Now} {
		users, err := user.NewService(user.Deps{
			Runner: db.Runner(clock), Events: db.Events(), Outbox: db.Outbox(), Views: sqlite.UserViews{}, Keys: fileKeys(t, path),
		}, user.Policy{}, "http://accounts.test")
		if err != nil {
			t.Fatal(err)
		}
		if err := users.RequestSignInLink(t.Context(), "ada@example.com"); err != nil {
			t.Fatal(err)
		}
		past.Advance(time.Minute)
	}
	// A message that no handler takes; two invitations' mails, one sent
	// two hours ago, whose code still works, and one sent eight days ago,
	// whose code expired; and the notice of a changed address sent two
	// hours ago, whose undo link still works. They and the three sign-in
	// mails are buried now, as a relay that could not deliver them would.
	var added []outbox.Message
	m, err := outbox.NewMessage("sms.login_code", map[string]string{"to": "+15550100"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	added = append(added, m)
	for _, age := range []time.Duration{2 * time.Hour, 8 * 24 * time.Hour} {
		sent := time.Now().Add(-age)
		m, err := outbox.NewMessage(mail.TopicOrgInvitation, mail.Link{
			To: "bob@example.com", URL: "http://accounts.test/invitations?code=x", Code: "x",
			ExpiresAt: sent.Add(7 * 24 * time.Hour), Organization: "Engines",
		}, sent)
		if err != nil {
			t.Fatal(err)
		}
		added = append(added, m)
	}
	notice, err := outbox.NewMessage(mail.TopicEmailChanged, mail.Link{
		To: "ada@example.com", URL: "http://accounts.test/email-change/undo?code=y", Code: "y",
		ExpiresAt: time.Now().Add(user.UndoTTL - 2*time.Hour), NewAddress: "a***@example.net",
	}, time.Now().Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	added = append(added, notice)
	if err := db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		return db.Outbox().Add(ctx, tx, added...)
	}); err != nil {
		t.Fatal(err)
	}
	claimed, err := db.Outbox().Claim(t.Context(), time.Now(), time.Minute, 10)
	if err != nil || len(claimed) != 7 {
		t.Fatalf("claim: %d messages, %v; want 7", len(claimed), err)
	}
	for _, c := range claimed {
		if err := db.Outbox().Bury(t.Context(), c.ID, "550 refused"); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path) // The driver the backend registers.
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	count := func(query string) int {
		t.Helper()
		var n int
		if err := raw.QueryRowContext(t.Context(), query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM signin_codes`); n != 3 {
		t.Fatalf("signin_codes holds %d rows before the app runs, want 3", n)
	}

	codes := func() int {
		return count(`SELECT count(*) FROM outbox_messages WHERE json_extract(payload, '$.code') IS NOT NULL OR json_extract(payload, '$.url') IS NOT NULL`)
	}
	if n := codes(); n != 6 {
		t.Fatalf("%d buried mails carry a code before the app runs, want 6", n)
	}
	await := func(app *e2eApp, what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(e2eWait)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("%s not within %s:\n%s", what, e2eWait, app.logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	env := map[string]string{
		"DATABASE_URL":            "sqlite:" + path,
		"HTTP_ADDR":               "127.0.0.1:0",
		"SMTP_URL":                smtptest.NewServer(t).URL(),
		"SWEEP_INTERVAL":          "1h", // The first sweep runs at start.
		"OUTBOX_BURIED_RETENTION": "0",  // Kept until discarded.
	}

	// Expired links' rows go; the expired links' buried mails lose their
	// codes, and the live link, invitation and undo link keep their own.
	app := e2eStart(t, env)
	await(app, "the sweep of expired links and codes", func() bool {
		return count(`SELECT count(*) FROM signin_codes`) == 1 && codes() == 3
	})
	app.stop(t)
	if n := count(`SELECT count(*) FROM outbox_messages WHERE buried_at IS NOT NULL`); n != 7 {
		t.Errorf("%d buried messages after a sweep that keeps them, want 7", n)
	}
	if n := count(`SELECT count(*) FROM outbox_messages WHERE topic = 'mail.email_changed' AND json_extract(payload, '$.code') IS NOT NULL`); n != 1 {
		t.Errorf("the buried notice of a changed address lost its undo link within user.UndoTTL")
	}
	if n := count(`SELECT count(*) FROM outbox_messages WHERE topic = 'mail.org_invitation' AND json_extract(payload, '$.code') IS NOT NULL`); n != 1 {
		t.Errorf("%d buried invitations keep their codes, want the one sent two hours ago", n)
	}
	for _, want := range []string{`msg=swept sweep="expired links and sessions" rows=2`, `msg=swept sweep="codes of buried mail whose link expired" rows=3`} {
		if !strings.Contains(app.logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, app.logs.String())
		}
	}

	// With a retention, buried messages past it go.
	env["OUTBOX_BURIED_RETENTION"] = "1ms"
	app = e2eStart(t, env)
	await(app, "the sweep of buried messages", func() bool {
		return count(`SELECT count(*) FROM outbox_messages`) == 0
	})
	app.stop(t)
	if want := `msg=swept sweep="buried messages past their retention" rows=7`; !strings.Contains(app.logs.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, app.logs.String())
	}

	// The sweeps go on every SWEEP_INTERVAL: links that expired since are
	// swept while the app runs. The second is asked for once the first is
	// gone, so a sweep after that one takes it.
	env["SWEEP_INTERVAL"] = "20ms"
	app = e2eStart(t, env)
	for _, address := range []string{"bob@example.com", "cy@example.com"} {
		db, err = sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		later, err := user.NewService(user.Deps{
			Runner: db.Runner(testclock.New(time.Now().Add(-time.Hour)).Now), Events: db.Events(), Outbox: db.Outbox(), Views: sqlite.UserViews{},
			Keys: fileKeys(t, path),
		}, user.Policy{}, "http://accounts.test")
		if err != nil {
			t.Fatal(err)
		}
		if err := later.RequestSignInLink(t.Context(), address); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		await(app, "the sweep of "+address+"'s expired link", func() bool {
			return count(`SELECT count(*) FROM signin_codes WHERE email = '`+address+`'`) == 0
		})
	}
	app.stop(t)
}

// fileKeys returns the keyring that the app keeps on the SQLite file at
// path without DATA_KEY: its master key in the file beside the database.
func fileKeys(t *testing.T, path string) *keyring.Keyring {
	t.Helper()
	m, _, err := keyring.LoadOrCreateKeyFile(path + ".key")
	if err != nil {
		t.Fatal(err)
	}
	k, err := keyring.New(m, sqlite.DataKeys{})
	if err != nil {
		t.Fatal(err)
	}
	return k
}
