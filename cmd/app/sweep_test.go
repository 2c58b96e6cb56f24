package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// TestServeSweepsWhatHasExpired: the running app deletes the rows of
// expired links and buried messages past OUTBOX_BURIED_RETENTION, at
// start and every SWEEP_INTERVAL, and keeps what is live.
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
			Runner: db.Runner(clock), Events: db.Events(), Outbox: db.Outbox(), Views: sqlite.UserViews{},
		}, user.Policy{}, "http://accounts.test")
		if err != nil {
			t.Fatal(err)
		}
		if err := users.RequestSignInLink(t.Context(), "ada@example.com"); err != nil {
			t.Fatal(err)
		}
		past.Advance(time.Minute)
	}
	// A message that no handler takes, buried now.
	m, err := outbox.NewMessage("sms.login_code", map[string]string{"to": "+15550100"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		return db.Outbox().Add(ctx, tx, m)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Outbox().Bury(t.Context(), m.ID, "no handler"); err != nil {
		t.Fatal(err)
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

	app := e2eStart(t, map[string]string{
		"DATABASE_URL":            "sqlite:" + path,
		"HTTP_ADDR":               "127.0.0.1:0",
		"RELAY":                   "false",
		"SWEEP_INTERVAL":          "1h", // The first sweep runs at start.
		"OUTBOX_BURIED_RETENTION": "1ms",
	})
	deadline := time.Now().Add(e2eWait)
	for count(`SELECT count(*) FROM signin_codes`) != 1 || count(`SELECT count(*) FROM outbox_messages WHERE buried_at IS NOT NULL`) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d sign-in codes, %d buried messages; want 1 and 0\n%s", e2eWait,
				count(`SELECT count(*) FROM signin_codes`), count(`SELECT count(*) FROM outbox_messages WHERE buried_at IS NOT NULL`), app.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(`SELECT count(*) FROM outbox_messages WHERE buried_at IS NULL`); n != 3 {
		t.Errorf("%d mails are still to deliver, want the 3 links' (the relay is off)", n)
	}
	app.stop(t)
	for _, want := range []string{`msg=swept sweep="expired links and sessions" rows=2`, `msg=swept sweep="buried messages past their retention" rows=1`} {
		if !strings.Contains(app.logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, app.logs.String())
		}
	}
}
