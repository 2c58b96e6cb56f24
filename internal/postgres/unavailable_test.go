package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// TestUnavailable: when the server goes away, at whatever step of a unit of
// work, the runner's error wraps uow.ErrUnavailable once, beside the
// driver's error; a context the caller cancelled is not reported so.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	add := func(ctx context.Context, store outbox.Store, tx uow.Tx) error {
		m, err := outbox.NewMessage("test.unavailable", "hi", tx.Now())
		if err != nil {
			return err
		}
		return store.Add(ctx, tx, m)
	}
	for _, c := range []struct {
		name string
		// do runs a unit of work during which, or before which, cut is
		// called.
		do func(ctx context.Context, db *postgres.DB, cut func()) error
	}{
		{"at begin", func(ctx context.Context, db *postgres.DB, cut func()) error {
			cut()
			return db.Runner(nil).Do(ctx, func(context.Context, uow.Tx) error { return nil })
		}},
		{"in the unit of work", func(ctx context.Context, db *postgres.DB, cut func()) error {
			return db.Runner(nil).Do(ctx, func(ctx context.Context, tx uow.Tx) error {
				cut()
				return add(ctx, db.Outbox(), tx)
			})
		}},
		{"at commit", func(ctx context.Context, db *postgres.DB, cut func()) error {
			return db.Runner(nil).Do(ctx, func(ctx context.Context, tx uow.Tx) error {
				if err := add(ctx, db.Outbox(), tx); err != nil {
					return err
				}
				cut()
				return nil
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db, cut := pgtest.NewCut(t)
			err := c.do(t.Context(), db, cut)
			wantUnavailable(t, "Do", err)
			wantUnavailable(t, "Ping", db.Ping(t.Context()))
		})
	}

	t.Run("not when the caller cancelled", func(t *testing.T) {
		t.Parallel()
		db, _ := pgtest.NewCut(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := db.Runner(nil).Do(ctx, func(context.Context, uow.Tx) error { return nil })
		if !errors.Is(err, context.Canceled) || errors.Is(err, uow.ErrUnavailable) {
			t.Errorf("Do with a cancelled context: %v, want context.Canceled and not ErrUnavailable", err)
		}
	})
}

// wantUnavailable checks that err wraps uow.ErrUnavailable, once, and an
// error of the driver.
func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, uow.ErrUnavailable) {
		t.Fatalf("%s: %v, want an error wrapping uow.ErrUnavailable", what, err)
	}
	if n := strings.Count(err.Error(), uow.ErrUnavailable.Error()); n != 1 {
		t.Errorf("%s: %q says %q %d times, want once", what, err, uow.ErrUnavailable, n)
	}
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	if !errors.As(err, &pgErr) && !errors.As(err, &connectErr) && !errors.As(err, &netErr) &&
		!errors.Is(err, pgconn.ErrConnClosed) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		t.Errorf("%s: %q wraps no error of the driver", what, err)
	}
}
