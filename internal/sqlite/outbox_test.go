package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
)

// TestWakeups checks the in-process wake-ups of the SQLite store
// ([outbox.RelayStore.Wakeups]).
//
// Wake-ups are sent by the committing Runner.Do before it returns, so each
// check needs no waiting: right after Do returns, a committed Add has put a
// wake-up in every channel, and a rolled-back one has put none. A wake-up
// from elsewhere could only come from another unit of work of this test's
// own database.
func TestWakeups(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	runner := db.Runner(nil)
	var _ outbox.RelayStore = db.Outbox()

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	// Two relays, each with an Outbox of its own, on one DB; a third Outbox
	// adds the messages.
	first, second := db.Outbox().Wakeups(ctx), db.Outbox().Wakeups(ctx)
	store := db.Outbox()
	pending := func(ch <-chan struct{}) bool {
		select {
		case _, ok := <-ch:
			if !ok {
				t.Fatal("wake-up channel closed")
			}
			return true
		default:
			return false
		}
	}
	if pending(first) || pending(second) {
		t.Fatal("a wake-up before any commit")
	}

	addOne(t, runner, store)
	if !pending(first) || !pending(second) {
		t.Fatal("a committed Add did not wake every subscriber by the time Do returned")
	}

	// Wake-ups coalesce: two commits leave one wake-up waiting.
	addOne(t, runner, store)
	addOne(t, runner, store)
	if !pending(first) || pending(first) {
		t.Error("two commits did not leave exactly one wake-up waiting")
	}
	pending(second)

	// A unit of work that adds nothing wakes nobody.
	if err := runner.Do(t.Context(), func(context.Context, uow.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if pending(first) || pending(second) {
		t.Error("a unit of work without messages woke a subscriber")
	}

	// A rolled-back Add wakes nobody, and the committed Add after it does.
	errRollback := errors.New("roll back")
	err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := addMessage(ctx, store, tx); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("rolled-back Add: Do = %v, want %v", err, errRollback)
	}
	if pending(first) || pending(second) {
		t.Error("a rolled-back Add woke a subscriber")
	}
	addOne(t, runner, store)
	if !pending(first) || !pending(second) {
		t.Error("the committed Add after a rolled-back one woke nobody")
	}

	// A database's wake-ups reach only its own subscribers.
	other := sqlitetest.New(t)
	addOne(t, other.Runner(nil), other.Outbox())
	if pending(first) {
		t.Error("a commit on another database woke this one's subscriber")
	}

	// The channels are closed when ctx is done.
	stop()
	for _, ch := range []<-chan struct{}{first, second} {
		select {
		case _, ok := <-ch:
			if ok {
				t.Error("a wake-up after the context was cancelled")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Wakeups channel still open 10s after its context was cancelled")
		}
	}
}
