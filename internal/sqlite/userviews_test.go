package sqlite_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
	"github.com/eventsourced/accounts/internal/user/viewstest"
)

// TestUserViews runs the conformance suite of [user.Views] on [sqlite.UserViews].
func TestUserViews(t *testing.T) {
	t.Parallel()
	viewstest.Run(t, func(t *testing.T) viewstest.Harness {
		db := sqlitetest.New(t)
		return viewstest.Harness{
			Runner: func(now func() time.Time) uow.Runner { return db.Runner(now) },
			Events: db.Events(),
			Outbox: db.Outbox(),
			Views:  sqlite.UserViews{},
		}
	})
}

// userViewTables are the projection tables of [sqlite.UserViews], each
// with the order of its primary key.
var userViewTables = []struct{ name, key string }{
	{"users", "id"},
	{"sessions", "token_hash"},
	{"signin_codes", "code_hash"},
	{"email_change_codes", "code_hash"},
}

// snapshotUserViews returns every row of every projection table, all
// columns in their text form, ordered by primary key.
func snapshotUserViews(t *testing.T, db *sqlite.DB) map[string][]string {
	t.Helper()
	snap := map[string][]string{}
	for _, table := range userViewTables {
		rows, err := sqlite.WriteDB(db).QueryContext(t.Context(),
			fmt.Sprintf(`SELECT * FROM %s ORDER BY %s`, table.name, table.key))
		if err != nil {
			t.Fatal(err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				parts[i] = fmt.Sprint(v)
			}
			snap[table.name] = append(snap[table.name], "("+strings.Join(parts, ",")+")")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return snap
}

// TestUserViewsRebuildEqualsLive drives a varied history through the user
// service, whose inline projections follow it live, and checks that
// rebuilding the projections from the events alone gives the same rows.
// It compares the tables, every row and column, which proves more than
// [viewstest] can through the queries: no row is left that no key names.
func TestUserViewsRebuildEqualsLive(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	ctx := t.Context()
	now := time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC) // Read by this goroutine only.
	runner := db.Runner(func() time.Time { return now })
	svc, err := user.NewService(user.Deps{
		Runner: runner, Events: db.Events(), Outbox: db.Outbox(), Views: sqlite.UserViews{},
	}, user.Policy{}, "https://accounts.test")
	if err != nil {
		t.Fatal(err)
	}
	store := db.Outbox()

	// code returns the code of the one mail sent since the last call.
	code := func(topic, to string) string {
		t.Helper()
		msgs, err := store.Claim(ctx, now.AddDate(100, 0, 0), time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 {
			t.Fatalf("outbox got %d messages, want 1", len(msgs))
		}
		var link mail.Link
		if err := json.Unmarshal(msgs[0].Payload, &link); err != nil {
			t.Fatal(err)
		}
		if msgs[0].Topic != topic || link.To != to {
			t.Fatalf("mail on %s to %s, want %s to %s", msgs[0].Topic, link.To, topic, to)
		}
		if err := store.Ack(ctx, msgs[0].ID); err != nil {
			t.Fatal(err)
		}
		return link.Code
	}
	link := func(email string) string {
		t.Helper()
		if err := svc.RequestSignInLink(ctx, email); err != nil {
			t.Fatal(err)
		}
		return code(mail.TopicLoginLink, email)
	}
	signIn := func(email string) user.Session {
		t.Helper()
		s, err := svc.SignIn(ctx, link(email))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	changeCode := func(token, email string) string {
		t.Helper()
		if err := svc.RequestEmailChange(ctx, token, email); err != nil {
			t.Fatal(err)
		}
		return code(mail.TopicEmailChange, email)
	}
	confirm := func(c string) {
		t.Helper()
		if _, err := svc.ConfirmEmailChange(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	want := func(err, target error) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Fatalf("got %v, want %v", err, target)
		}
	}

	// Several users sign in, some more than once; one signs out.
	ada := signIn("ada@example.com")
	bob := signIn("bob@example.com")
	bob2 := signIn("bob@example.com")
	want(svc.SignOut(ctx, bob.Token), nil)
	link("cy@example.com") // Never used: it expires in the table.
	now = now.Add(time.Minute)

	// Ada moves to a new address; a later person takes her old one.
	confirm(changeCode(ada.Token, "ada.new@example.com"))
	dan := signIn("ada@example.com")
	now = now.Add(time.Minute)

	// Bob asks for a change he lets expire, and one refused as taken.
	_ = changeCode(bob2.Token, "bob.later@example.com")
	want(svc.RequestEmailChange(ctx, bob2.Token, "ada.new@example.com"), user.ErrEmailTaken)

	// Bob and Dan both ask for one address; Dan confirms first. Bob's
	// confirmation then breaks the unique address in the views, which
	// SQLite reports as a constraint on users.email: ErrEmailTaken.
	bobRace := changeCode(bob2.Token, "eve@example.com")
	confirm(changeCode(dan.Token, "eve@example.com"))
	_, err = svc.ConfirmEmailChange(ctx, bobRace)
	want(err, user.ErrEmailTaken)

	// Links expire: an expired code is refused, and the next link of the
	// address clears the expired ones from the table.
	stale := link("fay@example.com")
	now = now.Add(16 * time.Minute)
	_, err = svc.SignIn(ctx, stale)
	want(err, user.ErrInvalidCode)
	fay := signIn("fay@example.com")
	_ = changeCode(fay.Token, "fay.new@example.com") // Left unconfirmed.

	// Sessions expire: a month on, Ada's and Bob's sessions are dead; their
	// next sign-ins clear the expired ones, and Bob's next change request
	// clears his expired change codes.
	now = now.Add(31 * 24 * time.Hour)
	_, err = svc.Me(ctx, ada.Token)
	want(err, user.ErrUnauthenticated)
	signIn("ada.new@example.com")
	bob3 := signIn("bob@example.com")
	_ = changeCode(bob3.Token, "bob.much.later@example.com")
	signIn("gus@example.com")
	want(svc.SignOut(ctx, bob3.Token), nil)
	if s := signIn("eve@example.com"); s.User.ID != dan.User.ID {
		t.Errorf("eve@example.com signs in to %s, want Dan's account %s", s.User.ID, dan.User.ID)
	}

	live := snapshotUserViews(t, db)
	for _, table := range userViewTables {
		if len(live[table.name]) == 0 {
			t.Fatalf("the history left table %s empty; the rebuild would prove little", table.name)
		}
	}
	if got := live["users"]; len(got) != 5 {
		t.Errorf("users table holds %d rows, want 5 (ada, bob, dan, fay, gus; cy never signed in): %v", len(got), got)
	}

	var events int
	if err := sqlite.WriteDB(db).QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&events); err != nil {
		t.Fatal(err)
	}

	// Wreck the projections, so that only a rebuild that really replays the
	// events can give the live rows back.
	_, err = sqlite.WriteDB(db).ExecContext(ctx, `
DELETE FROM sessions;
DELETE FROM signin_codes WHERE code_hash IN (SELECT code_hash FROM signin_codes LIMIT 1);
UPDATE users SET email = 'x' || email;
INSERT INTO email_change_codes (code_hash, user_id, expires_at) VALUES ('bogus', '00000000-0000-0000-0000-000000000001', 0)`)
	if err != nil {
		t.Fatal(err)
	}
	if wrecked := snapshotUserViews(t, db); len(wrecked["sessions"]) != 0 || len(wrecked["email_change_codes"]) != len(live["email_change_codes"])+1 {
		t.Fatalf("the wrecking did not take: %v", wrecked)
	}

	// The log is in exact commit order and holds nothing uncommitted, so one
	// rebuild replays all of it.
	n, err := projections.Rebuild(ctx, runner, db.Events(), sqlite.UserViews{})
	if err != nil {
		t.Fatal(err)
	}
	if n != events {
		t.Fatalf("rebuild replayed %d events, but the log holds %d", n, events)
	}

	rebuilt := snapshotUserViews(t, db)
	for _, table := range userViewTables {
		l, r := live[table.name], rebuilt[table.name]
		if !slices.Equal(l, r) {
			t.Errorf("table %s differs after the rebuild:\nlive:    %v\nrebuilt: %v", table.name, l, r)
		}
	}
}
