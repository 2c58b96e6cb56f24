package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/uow"
)

// backend names this package in errors.
const backend = "postgres"

// Runner runs units of work in PostgreSQL transactions.
type Runner struct {
	db  *DB
	now func() time.Time
}

var _ uow.Runner = (*Runner)(nil)

// tx is the [uow.Tx] of this backend.
type tx struct {
	pgx.Tx
	db  *DB
	now time.Time
	// afterCommit runs, in order, once the transaction has committed, and
	// never when it rolls back.
	afterCommit []func()
	// wakes is set once afterCommit wakes the relays of db.
	wakes bool
}

func (t *tx) Now() time.Time { return t.now }

// onCommit makes fn run once t has committed, and never if it rolls back.
func (t *tx) onCommit(fn func()) { t.afterCommit = append(t.afterCommit, fn) }

// wakeRelays makes the commit of t wake the relays of its DB, once however
// often it is called: those of this process at once, those of others
// through the DB's notifier.
func (t *tx) wakeRelays() {
	if t.wakes {
		return
	}
	t.wakes = true
	t.onCommit(func() {
		t.db.wake.Wake()
		t.db.notifier.notify()
	})
}

// Do runs fn in a transaction, as [uow.Runner] describes. The transaction's
// time is read from the runner's clock once, in UTC, to the microsecond that
// PostgreSQL keeps. When the server cannot be reached, went away or has no
// connection to spare, the error (of beginning, of fn or of committing)
// wraps [uow.ErrUnavailable]. After a commit it runs the transaction's
// after-commit hooks, by which [Outbox.Add] wakes relays; a rollback runs
// none.
func (r *Runner) Do(ctx context.Context, fn func(ctx context.Context, tx uow.Tx) error) error {
	ptx, err := r.db.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", unavailable(ctx, err))
	}
	// Rollback after Commit is a no-op, so this covers errors and panics.
	defer func() { _ = ptx.Rollback(context.WithoutCancel(ctx)) }()
	t := &tx{Tx: ptx, db: r.db, now: r.now().UTC().Truncate(time.Microsecond)}
	if err := fn(ctx, t); err != nil {
		return unavailable(ctx, err)
	}
	if err := ptx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit: %w", unavailable(ctx, err))
	}
	for _, fn := range t.afterCommit {
		fn()
	}
	return nil
}

// PgxTx returns the pgx transaction inside a [uow.Tx] made by a [Runner] of
// this package, or an error wrapping [uow.ErrForeignTx].
func PgxTx(t uow.Tx) (pgx.Tx, error) {
	pt, err := asTx(t)
	if err != nil {
		return nil, err
	}
	return pt.Tx, nil
}

// asTx returns the tx inside t, or an error wrapping [uow.ErrForeignTx].
func asTx(t uow.Tx) (*tx, error) {
	pt, ok := t.(*tx)
	if !ok || pt == nil {
		return nil, uow.Foreign(backend, t)
	}
	return pt, nil
}
