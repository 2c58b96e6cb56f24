package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
	"github.com/eventsourced/accounts/internal/user/viewstest"
)

// TestUserViews runs the conformance suite of [user.Views] on [postgres.UserViews].
func TestUserViews(t *testing.T) {
	t.Parallel()
	viewstest.Run(t, func(t *testing.T) viewstest.Harness {
		db := pgtest.New(t)
		return viewstest.Harness{
			Runner: func(now func() time.Time) uow.Runner { return db.Runner(now) },
			Events: db.Events(),
			Outbox: db.Outbox(),
			Views:  postgres.UserViews{},
		}
	})
}

// userViewTables are the projection tables of [postgres.UserViews], each
// with the order of its primary key.
var userViewTables = []struct{ name, key string }{
	{"users", "id"},
	{"sessions", "token_hash"},
	{"signin_codes", "code_hash"},
	{"email_change_codes", "code_hash"},
}

// snapshotUserViews returns every row of every projection table, all
// columns in their text form, ordered by primary key.
func snapshotUserViews(t *testing.T, db *postgres.DB) map[string][]string {
	t.Helper()
	snap := map[string][]string{}
	for _, table := range userViewTables {
		rows, err := db.Pool().Query(t.Context(),
			fmt.Sprintf(`SELECT t::text FROM %s AS t ORDER BY %s`, table.name, table.key))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var row string
			if err := rows.Scan(&row); err != nil {
				t.Fatal(err)
			}
			snap[table.name] = append(snap[table.name], row)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
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
	db := pgtest.New(t)
	ctx := t.Context()
	now := time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC) // Read by this goroutine only.
	runner := db.Runner(func() time.Time { return now })
	svc, err := user.NewService(user.Deps{
		Runner: runner, Events: db.Events(), Outbox: db.Outbox(), Views: postgres.UserViews{},
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

	// Bob and Dan both ask for one address; Dan confirms first.
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
	if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&events); err != nil {
		t.Fatal(err)
	}

	// Wreck the projections, so that only a rebuild that really replays the
	// events can give the live rows back.
	_, err = db.Pool().Exec(ctx, `
DELETE FROM sessions;
DELETE FROM signin_codes WHERE code_hash IN (SELECT code_hash FROM signin_codes LIMIT 1);
UPDATE users SET email = 'x' || email;
INSERT INTO email_change_codes (code_hash, user_id, expires_at) VALUES ('bogus', gen_random_uuid(), now())`)
	if err != nil {
		t.Fatal(err)
	}
	if wrecked := snapshotUserViews(t, db); len(wrecked["sessions"]) != 0 {
		t.Fatalf("sessions survived the wrecking: %v", wrecked["sessions"])
	}

	// ReadAll returns only events older than every transaction in flight on
	// the whole server, so a transaction of another test can hold back the
	// end of the log for a while: rebuild again until it replays all.
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 1; ; attempt++ {
		n, err := projections.Rebuild(ctx, runner, db.Events(), postgres.UserViews{})
		if err != nil {
			t.Fatal(err)
		}
		if n == events {
			if attempt > 1 {
				t.Logf("rebuild replayed all %d events at attempt %d", n, attempt)
			}
			break
		}
		if n > events {
			t.Fatalf("rebuild replayed %d events, but the log holds %d", n, events)
		}
		if time.Now().After(deadline) {
			t.Fatalf("rebuild replayed %d of %d events until the deadline", n, events)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}

	rebuilt := snapshotUserViews(t, db)
	for _, table := range userViewTables {
		l, r := live[table.name], rebuilt[table.name]
		if !slices.Equal(l, r) {
			t.Errorf("table %s differs after the rebuild:\nlive:    %v\nrebuilt: %v", table.name, l, r)
		}
	}
}

// TestUserViewsRebuildDefersUniqueAddress builds a log whose order is not
// the order in which its transactions committed: the log orders them by
// transaction ID, which a transaction takes at its first write, so one that
// began writing first but committed last comes first. Here that one
// registers an address which the other, committed earlier, freed. Replayed
// in log order, the address is held twice until the change that frees it,
// which only the constraint that [postgres.UserViews.Reset] defers to the
// commit lets through.
func TestUserViewsRebuildDefersUniqueAddress(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := t.Context()
	runner, store, views := db.Runner(nil), db.Events(), postgres.UserViews{}
	ada, bob := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	const x, y = "x@example.com", "y@example.com"

	// appendApply appends one event as the service does, and applies it.
	appendApply := func(ctx context.Context, tx uow.Tx, id uuid.UUID, typ string, data any) error {
		e, err := eventstore.NewEvent(typ, data, eventstore.Metadata{})
		if err != nil {
			return err
		}
		appended, err := store.Append(ctx, tx, "user-"+id.String(), eventstore.Any, e)
		if err != nil {
			return err
		}
		return views.Apply(ctx, tx, appended...)
	}

	err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		return appendApply(ctx, tx, ada, user.TypeRegistered, user.Registered{UserID: ada, Email: x})
	})
	if err != nil {
		t.Fatal(err)
	}

	// Bob's unit of work takes its transaction ID, then waits while Ada's
	// moves her from x to y and commits; then it registers Bob at x.
	xidTaken, proceed := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(proceed) })
	// Runs before pgtest's cleanup, which waits for connections.
	t.Cleanup(release)
	bobDone := make(chan error, 1)
	go func() {
		bobDone <- runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			ptx, err := postgres.PgxTx(tx)
			if err != nil {
				return err
			}
			if _, err := ptx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
				return err
			}
			close(xidTaken)
			<-proceed
			return appendApply(ctx, tx, bob, user.TypeRegistered, user.Registered{UserID: bob, Email: x})
		})
	}()
	select {
	case <-xidTaken:
	case err := <-bobDone:
		t.Fatalf("Bob's unit of work ended early: %v", err)
	}
	err = runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		return appendApply(ctx, tx, ada, user.TypeEmailChanged, user.EmailChanged{UserID: ada, OldEmail: x, NewEmail: y, CodeHash: "code"})
	})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-bobDone; err != nil {
		t.Fatalf("Bob's unit of work: %v", err)
	}

	// The log has Bob's registration before Ada's move, or this test would
	// prove nothing.
	var order []string
	err = runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		events, err := store.ReadCommitted(ctx, tx, eventstore.Position{}, 10)
		for _, e := range events {
			order = append(order, e.Stream+" "+e.Type)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user-" + ada.String() + " " + user.TypeRegistered, "user-" + bob.String() + " " + user.TypeRegistered, "user-" + ada.String() + " " + user.TypeEmailChanged}
	if !slices.Equal(order, want) {
		t.Fatalf("the log is %v, want %v", order, want)
	}

	n, err := projections.Rebuild(ctx, runner, store, views)
	if err != nil {
		t.Fatalf("Rebuild of a log that holds an address twice until its last event: %v", err)
	}
	if n != len(want) {
		t.Fatalf("Rebuild replayed %d events, want %d", n, len(want))
	}
	err = runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		for email, id := range map[string]uuid.UUID{x: bob, y: ada} {
			u, ok, err := views.UserByEmail(ctx, tx, email)
			if err != nil {
				return err
			}
			if !ok || u.ID != id {
				t.Errorf("after the rebuild, UserByEmail(%s) = %v (found %t), want %s", email, u.ID, ok, id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
