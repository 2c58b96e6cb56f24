package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/uow/uowtest"
)

func TestRunner(t *testing.T) {
	t.Parallel()
	uowtest.Run(t, func(t *testing.T) uowtest.Harness {
		db := sqlitetest.New(t)
		return uowtest.Harness{
			Runner: func(now func() time.Time) uow.Runner { return db.Runner(now) },
			Outbox: db.Outbox(),
			Events: db.Events(),
		}
	})
}

type foreignTx struct{}

func (foreignTx) Now() time.Time { return time.Time{} }

// The user views are no store of the runner's suite; they refuse a foreign
// Tx as the outbox and the event store do.
func TestUserViewsRefuseAForeignTx(t *testing.T) {
	t.Parallel()
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
