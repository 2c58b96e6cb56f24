package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// claimable counts the messages a claim far in the future returns.
func claimable(t *testing.T, store *postgres.Outbox) int {
	t.Helper()
	msgs, err := store.Claim(t.Context(), time.Now().Add(24*time.Hour), time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	return len(msgs)
}

func addMessage(ctx context.Context, store *postgres.Outbox, tx uow.Tx) error {
	m, err := outbox.NewMessage("mail", "hi", tx.Now())
	if err != nil {
		return err
	}
	return store.Add(ctx, tx, m)
}

func TestRunnerCommitsOnNilAndRollsBackOnError(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store, runner := db.Outbox(), db.Runner(nil)
	boom := errors.New("decided against it")
	err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := addMessage(ctx, store, tx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Do returned %v, want the function's error as it is", err)
	}
	if n := claimable(t, store); n != 0 {
		t.Fatalf("a rolled-back unit of work left %d messages", n)
	}
	err = runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error { return addMessage(ctx, store, tx) })
	if err != nil {
		t.Fatal(err)
	}
	if n := claimable(t, store); n != 1 {
		t.Fatalf("a committed unit of work left %d messages, want 1", n)
	}
}

func TestRunnerRollsBackAndRepanicsOnPanic(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
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
	// The pool got its connection back: another unit of work runs.
	if err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error { return addMessage(ctx, store, tx) }); err != nil {
		t.Fatal(err)
	}
}

func TestRunnerReadsTheClockOncePerUnitOfWork(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
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
	db := pgtest.New(t)
	m, err := outbox.NewMessage("mail", "hi", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Outbox().Add(t.Context(), foreignTx{}, m); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("Outbox.Add with a foreign tx: %v, want ErrForeignTx", err)
	}
	if _, err := postgres.PgxTx(nil); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("PgxTx(nil): %v, want ErrForeignTx", err)
	}
}

// Instances that start together all migrate at once; a lock lets one do it
// while the others wait and then find nothing to do.
func TestConcurrentMigrations(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	errs := make(chan error, 4)
	start := make(chan struct{})
	for range 4 {
		go func() {
			<-start
			db, err := postgres.Open(t.Context(), url)
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			_, err = db.Migrate(t.Context())
			errs <- err
		}()
	}
	close(start)
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
