package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// TestWakeups checks the wake-ups of the PostgreSQL store
// ([outbox.RelayStore.Wakeups]), for commits made through the same DB: they wake its relays in process, before
// Do returns, and a rollback wakes nobody and asks for no notification.
// Commits of other processes are [TestWakeupsFromOtherProcesses]'s to check.
//
// The notification channel is named after the schema, and each test has a
// schema of its own, so another test's Add cannot wake this listener; the
// DB's own notifications wake nobody again.
func TestWakeups(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := db.Outbox()
	runner := db.Runner(nil)
	var _ outbox.RelayStore = store

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	wakeups := store.Wakeups(ctx)
	// The first wake-up says that the listener is listening.
	awaitWakeup(t, wakeups, "the wake-up sent once listening")

	for round := range 3 {
		addOne(t, runner, store, round)
		wantWoken(t, wakeups, true, fmt.Sprintf("committed Add %d", round))
	}

	errRollback := errors.New("roll back")
	err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		m, err := outbox.NewMessage("test.wakeups", "rolled back", tx.Now())
		if err != nil {
			return err
		}
		if err := store.Add(ctx, tx, m); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("rolled-back Add: Do = %v, want %v", err, errRollback)
	}
	wantWoken(t, wakeups, false, "a rolled-back Add")
	if n := postgres.NotifyRequests(db); n != 3 {
		t.Errorf("3 committed Adds and a rolled-back one asked for %d notifications, want 3", n)
	}
	addOne(t, runner, store, 3)
	wantWoken(t, wakeups, true, "a committed Add after a rolled-back one")

	// The channel is closed when ctx is done.
	stop()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-wakeups:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Wakeups channel still open 10s after its context was cancelled")
		}
	}
}

// addOne adds one message in a committed unit of work.
func addOne(t *testing.T, runner uow.Runner, store outbox.Store, n int) {
	t.Helper()
	err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		m, err := outbox.NewMessage("test.wakeups", n, tx.Now())
		if err != nil {
			return err
		}
		return store.Add(ctx, tx, m)
	})
	if err != nil {
		t.Fatalf("add: %v", err)
	}
}

// awaitWakeup waits for a wake-up; what names it in the failure.
func awaitWakeup(t *testing.T, wakeups <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-wakeups:
		if !ok {
			t.Fatalf("waiting for %s: channel closed", what)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
	}
}

// wantWoken checks, without waiting, whether a wake-up is pending after
// what.
func wantWoken(t *testing.T, wakeups <-chan struct{}, want bool, what string) {
	t.Helper()
	select {
	case <-wakeups:
		if !want {
			t.Errorf("woken after %s, want no wake-up", what)
		}
	default:
		if want {
			t.Errorf("no wake-up pending once Do of %s returned", what)
		}
	}
}
