package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sqlitedriver "modernc.org/sqlite"

	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
)

// TestBusyIsUnavailable: a unit of work that finds the write lock held by
// another process for longer than the busy timeout fails with an error
// that wraps uow.ErrUnavailable once and the driver's SQLITE_BUSY; a
// context the caller cancelled is not reported so.
func TestBusyIsUnavailable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "test.db")
	db := sqlitetest.NewAt(t, path, sqlite.WithBusyTimeout(20*time.Millisecond))
	runner, store := db.Runner(nil), db.Outbox()

	release := sqlitetest.HoldWriteLock(t, path)
	err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error { return addMessage(ctx, store, tx) })
	if !errors.Is(err, uow.ErrUnavailable) {
		t.Fatalf("Do while another process writes: %v, want an error wrapping uow.ErrUnavailable", err)
	}
	if n := strings.Count(err.Error(), uow.ErrUnavailable.Error()); n != 1 {
		t.Errorf("Do: %q says %q %d times, want once", err, uow.ErrUnavailable, n)
	}
	var driverErr *sqlitedriver.Error
	if !errors.As(err, &driverErr) {
		t.Errorf("Do: %q wraps no error of the driver", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = runner.Do(ctx, func(context.Context, uow.Tx) error { return nil })
	if !errors.Is(err, context.Canceled) || errors.Is(err, uow.ErrUnavailable) {
		t.Errorf("Do with a cancelled context: %v, want context.Canceled and not ErrUnavailable", err)
	}

	release()
	addOne(t, runner, store)
	if n := claimable(t, store); n != 1 {
		t.Errorf("%d messages stored, want the one added once the lock was free", n)
	}
}
