package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// TestRunner checks the PostgreSQL unit of work beyond the conformance suite.
func TestRunner(t *testing.T) {
	t.Parallel()
	t.Run("PgxTxRefusesNil", testPgxTxRefusesNil)
	t.Run("DeadlockIsALostRace", testDeadlockIsALostRace)
}

// PgxTx, by which the stores and this package's tests reach pgx, refuses a
// nil Tx; the suite sees that only through the stores.
func testPgxTxRefusesNil(t *testing.T) {
	t.Parallel()
	if _, err := postgres.PgxTx(nil); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("PgxTx(nil): %v, want ErrForeignTx", err)
	}
}

// Two units of work that wait for each other's locks deadlock; the one
// PostgreSQL aborts returns an error wrapping eventstore.ErrConcurrency,
// so that a command tries it again, and the other commits.
func testDeadlockIsALostRace(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	runner := db.Runner(nil)
	locked := make(chan struct{}, 2)
	both := make(chan struct{})
	var once sync.Once
	unit := func(first, second int64) error {
		return runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			q, err := postgres.PgxTx(tx)
			if err != nil {
				return err
			}
			if _, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, first); err != nil {
				return err
			}
			locked <- struct{}{}
			if len(locked) == 2 {
				once.Do(func() { close(both) })
			}
			<-both
			_, err = q.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, second)
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- unit(1, 2) }()
	go func() { errs <- unit(2, 1) }()
	var lost, won int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			won++
		case errors.Is(err, eventstore.ErrConcurrency):
			lost++
		default:
			t.Errorf("a unit of work of the deadlock: %v, want nil or ErrConcurrency", err)
		}
	}
	if lost != 1 || won != 1 {
		t.Errorf("%d units of work lost and %d won the deadlock, want one each", lost, won)
	}
}
