package sqlite_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail/mailtest"
)

type foreignTx struct{}

func (foreignTx) Now() time.Time { return time.Time{} }

// The user views are no store of the runner's suite; they refuse a foreign
// Tx as the outbox and the event store do.
func TestUserViewsRefuseAForeignTx(t *testing.T) {
	t.Parallel()
	views := sqlite.UserViews{}
	registered, err := eventstore.NewEvent(user.TypeRegistered, user.Registered{UserID: uuid.New(), Email: "a@example.com"}, eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	apply := user.ViewsProjection{Views: views}.Apply
	if err := apply(t.Context(), foreignTx{}, registered); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("UserViews.Apply with a foreign tx: %v, want ErrForeignTx", err)
	}
	if _, _, err := views.UserByEmail(t.Context(), foreignTx{}, "a@example.com"); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("UserViews.UserByEmail with a foreign tx: %v, want ErrForeignTx", err)
	}
	if err := views.Reset(t.Context(), foreignTx{}); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("UserViews.Reset with a foreign tx: %v, want ErrForeignTx", err)
	}
}

// TestRunner checks the SQLite unit of work beside its one writer: writes inside a unit of work fail instead of waiting, and reads never wait for the writer.
func TestRunner(t *testing.T) {
	t.Parallel()
	t.Run("WritesInsideAUnitOfWorkFailInsteadOfWaiting", testWritesInsideAUnitOfWorkFailInsteadOfWaiting)
	t.Run("ReadDoesNotWaitForAWriter", testReadDoesNotWaitForAWriter)
	t.Run("MeDoesNotWaitForAWriter", testMeDoesNotWaitForAWriter)
}

// A write of the same DB inside a unit of work would wait for the one write
// connection that the unit of work holds; it fails at once instead.
func testWritesInsideAUnitOfWorkFailInsteadOfWaiting(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	runner, store := db.Runner(nil), db.Outbox()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		if err := runner.Do(ctx, func(context.Context, uow.Tx) error { return nil }); err == nil {
			t.Error("a nested Do succeeded, want an error")
		}
		if _, err := store.Claim(ctx, time.Now(), time.Minute, 10); err == nil {
			t.Error("Claim inside a unit of work succeeded, want an error")
		}
		if err := store.Ack(ctx, mustV7(t)); err == nil {
			t.Error("Ack inside a unit of work succeeded, want an error")
		}
		// Reads of the Inspector wait for no writer.
		if _, err := store.Backlog(ctx, time.Now()); err != nil {
			t.Errorf("Backlog inside a unit of work: %v", err)
		}
		return addMessage(ctx, store, tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := claimable(t, store); n != 1 {
		t.Fatalf("the unit of work left %d messages, want 1", n)
	}
}

// holdWriter starts a unit of work of Do that runs fn and then holds the
// write connection until release is called, or t ends. It returns once fn
// has run; done reports how the unit of work ended.
func holdWriter(t *testing.T, runner uow.Runner, fn func(ctx context.Context, tx uow.Tx) error) (release func(), done <-chan error) {
	t.Helper()
	holding, released := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(released) })
	t.Cleanup(release) // Before the database closes, on failure too.
	ended := make(chan error, 1)
	go func() {
		ended <- runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			if err := fn(ctx, tx); err != nil {
				return err
			}
			close(holding)
			<-released
			return nil
		})
	}()
	select {
	case <-holding:
	case err := <-ended:
		t.Fatalf("the writer ended before it held the write connection: %v", err)
	}
	return release, ended
}

// wantHeld checks that the writer of done has not ended.
func wantHeld(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("the writer ended (%v) before it was released", err)
	default:
	}
}

// readWithin bounds a read that must not wait for a writer: were it to
// wait for the write connection, it fails when its context ends, instead
// of waiting for ever.
const readWithin = 30 * time.Second

// A read-only unit of work runs on the read pool: it ends while a unit of
// work of Do holds the write connection, and sees what was committed
// before, not what the writer has written so far.
func testReadDoesNotWaitForAWriter(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	runner, events := db.Runner(nil), db.Events()
	appendOne := func(ctx context.Context, tx uow.Tx) (eventstore.Event, error) {
		e, err := eventstore.NewEvent("test.happened", map[string]int{"n": 1}, eventstore.Metadata{})
		if err != nil {
			return e, err
		}
		_, err = events.Append(ctx, tx, "s", eventstore.Any, e)
		return e, err
	}
	var committed eventstore.Event
	err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) (err error) {
		committed, err = appendOne(ctx, tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	release, done := holdWriter(t, runner, func(ctx context.Context, tx uow.Tx) error {
		_, err := appendOne(ctx, tx)
		return err
	})

	ctx, cancel := context.WithTimeout(t.Context(), readWithin)
	defer cancel()
	var seen []eventstore.Event
	err = runner.Read(ctx, func(ctx context.Context, tx uow.Tx) (err error) {
		seen, err = events.Load(ctx, tx, "s", 1)
		return err
	})
	if err != nil {
		t.Fatalf("Read while a writer holds the write connection: %v", err)
	}
	wantHeld(t, done)
	if len(seen) != 1 || seen[0].ID != committed.ID {
		t.Errorf("Read saw %d events, want only the committed one %s", len(seen), committed.ID)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the writer: %v", err)
	}
}

// The service's queries are read-only units of work: who holds a session
// is answered while a command holds the write connection.
func testMeDoesNotWaitForAWriter(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	clock := testclock.New(time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC))
	runner := db.Runner(clock.Now)
	svc, err := user.NewService(user.Deps{
		Runner: runner, Events: db.Events(), Outbox: db.Outbox(), Views: sqlite.UserViews{},
		Keys: keyringtest.New(t, sqlite.DataKeys{}),
	}, user.Policy{}, "https://accounts.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.RequestSignInLink(t.Context(), "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	sent := mailtest.Take(t, db.Outbox(), clock.Now().AddDate(1, 0, 0))
	if len(sent) != 1 {
		t.Fatalf("the outbox got %d mails, want 1", len(sent))
	}
	session, err := svc.SignIn(t.Context(), sent[0].Link.Code)
	if err != nil {
		t.Fatal(err)
	}
	release, done := holdWriter(t, runner, func(context.Context, uow.Tx) error { return nil })

	ctx, cancel := context.WithTimeout(t.Context(), readWithin)
	defer cancel()
	u, err := svc.Me(ctx, session.Token)
	if err != nil {
		t.Fatalf("Me while a writer holds the write connection: %v", err)
	}
	wantHeld(t, done)
	if u.ID != session.User.ID {
		t.Errorf("Me = %s, want the session's user %s", u.ID, session.User.ID)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the writer: %v", err)
	}
}
