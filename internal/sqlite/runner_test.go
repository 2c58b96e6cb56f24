package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
)

func TestRunnerCommitsOnNilAndRollsBackOnError(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	store, runner := db.Outbox(), db.Runner(nil)
	boom := errors.New("decided against it")
	err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := addMessage(ctx, store, tx); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Do returned %v, want the function's error as it is", err)
	}
	if n := claimable(t, store); n != 0 {
		t.Fatalf("a rolled-back unit of work left %d messages", n)
	}
	addOne(t, runner, store)
	if n := claimable(t, store); n != 1 {
		t.Fatalf("a committed unit of work left %d messages, want 1", n)
	}
}

func TestRunnerRollsBackAndRepanicsOnPanic(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	store, runner := db.Outbox(), db.Runner(nil)
	func() {
		defer func() {
			if p := recover(); p != "handler bug" {
				t.Errorf("recovered %v, want the function's panic", p)
			}
		}()
		_ = runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			if err := addMessage(ctx, store, tx); err != nil {
				return err
			}
			panic("handler bug")
		})
	}()
	if n := claimable(t, store); n != 0 {
		t.Fatalf("a unit of work that panicked left %d messages", n)
	}
	// The one write connection came back: another unit of work runs.
	addOne(t, runner, store)
	if n := claimable(t, store); n != 1 {
		t.Fatalf("the unit of work after the panic left %d messages, want 1", n)
	}
}

func TestRunnerReadsTheClockOncePerUnitOfWork(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	reads := 0
	clock := func() time.Time {
		reads++
		return time.Date(2030, 1, 2, 3, 4, 5, 6789, time.FixedZone("CET", 3600))
	}
	err := db.Runner(clock).Do(t.Context(), func(_ context.Context, tx uow.Tx) error {
		first := tx.Now()
		if !tx.Now().Equal(first) {
			t.Error("Now changed within one unit of work")
		}
		if want := time.Date(2030, 1, 2, 2, 4, 5, 6000, time.UTC); first != want {
			t.Errorf("Now = %v, want %v: UTC, to the microsecond", first, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if reads != 1 {
		t.Errorf("clock read %d times, want once", reads)
	}
}

type foreignTx struct{}

func (foreignTx) Now() time.Time { return time.Time{} }

func TestStoresRefuseAForeignTx(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	m, err := outbox.NewMessage("mail", "hi", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Outbox().Add(t.Context(), foreignTx{}, m); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("Outbox.Add with a foreign tx: %v, want ErrForeignTx", err)
	}
	if err := db.Outbox().Add(t.Context(), nil, m); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("Outbox.Add with a nil tx: %v, want ErrForeignTx", err)
	}
	views := sqlite.UserViews{}
	if err := views.Apply(t.Context(), foreignTx{}); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("UserViews.Apply with a foreign tx: %v, want ErrForeignTx", err)
	}
	if _, _, err := views.UserByEmail(t.Context(), foreignTx{}, "a@example.com"); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("UserViews.UserByEmail with a foreign tx: %v, want ErrForeignTx", err)
	}
	if err := views.Reset(t.Context(), foreignTx{}); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("UserViews.Reset with a foreign tx: %v, want ErrForeignTx", err)
	}
}

// A write of the same DB inside a unit of work would wait for the one write
// connection that the unit of work holds; it fails at once instead.
func TestWritesInsideAUnitOfWorkFailInsteadOfWaiting(t *testing.T) {
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
		if _, _, err := store.OldestDue(ctx, time.Now()); err != nil {
			t.Errorf("OldestDue inside a unit of work: %v", err)
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
