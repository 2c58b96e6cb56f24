package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// HoldXminHorizon opens a REPEATABLE READ transaction on PostgreSQL that
// reads the outbox and stays open until the returned function is called, so
// that no row deleted or updated meanwhile can be vacuumed away: the worst
// case of a queue in a shared database.
func HoldXminHorizon(ctx context.Context, db *pgxpool.Pool) (release func(), err error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return nil, fmt.Errorf("bench: hold xmin: %w", err)
	}
	var n int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM outbox_messages`).Scan(&n); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("bench: hold xmin: %w", err)
	}
	return func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }, nil
}
