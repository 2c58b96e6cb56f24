package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventsourced/accounts/internal/uow"
)

// backend names this package in errors.
const backend = "postgres"

// Runner runs units of work in PostgreSQL transactions.
type Runner struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

var _ uow.Runner = (*Runner)(nil)

// tx is the [uow.Tx] of this backend.
type tx struct {
	pgx.Tx
	now time.Time
}

func (t *tx) Now() time.Time { return t.now }

// Do runs fn in a transaction, as [uow.Runner] describes. The transaction's
// time is read from the runner's clock once, in UTC, to the microsecond that
// PostgreSQL keeps. When the server cannot be reached, went away or has no
// connection to spare, the error (of beginning, of fn or of committing)
// wraps [uow.ErrUnavailable].
func (r *Runner) Do(ctx context.Context, fn func(ctx context.Context, tx uow.Tx) error) error {
	ptx, err := r.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", unavailable(ctx, err))
	}
	// Rollback after Commit is a no-op, so this covers errors and panics.
	defer func() { _ = ptx.Rollback(context.WithoutCancel(ctx)) }()
	t := &tx{Tx: ptx, now: r.now().UTC().Truncate(time.Microsecond)}
	if err := fn(ctx, t); err != nil {
		return unavailable(ctx, err)
	}
	if err := ptx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit: %w", unavailable(ctx, err))
	}
	return nil
}

// PgxTx returns the pgx transaction inside a [uow.Tx] made by a [Runner] of
// this package, or an error wrapping [uow.ErrForeignTx].
func PgxTx(t uow.Tx) (pgx.Tx, error) {
	pt, ok := t.(*tx)
	if !ok || pt == nil {
		return nil, uow.Foreign(backend, t)
	}
	return pt.Tx, nil
}
