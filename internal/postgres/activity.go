package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// ActivityStore is the activity read model on PostgreSQL
// ([user.ActivityStore]): what happened to each account, newest first.
// Version v keeps its rows in the table activity_vv; reads query the view
// activity, of the version that serves. Its writes run in the transactions
// of a [Log] subscriber ([SQLTx]).
type ActivityStore struct {
	pool Querier
}

var _ user.ActivityStore = ActivityStore{}

// ActivityStore returns the tables of the activity projection over db.
func (db *DB) ActivityStore() user.ActivityStore { return ActivityStore{pool: db.main()} }

// activityTable names the table of version v: activity_v1 for version 1,
// which migration 00005 makes.
func activityTable(v int) string { return "activity_v" + strconv.Itoa(v) }

// Create makes the version's table, as migration 00005 made version 1's.
func (ActivityStore) Create(ctx context.Context, t uow.Tx, v int) error {
	return activityExec(ctx, t, v, "create", `CREATE TABLE IF NOT EXISTS `+activityTable(v)+` (
	user_id         uuid        NOT NULL,
	position_commit bigint      NOT NULL,
	position_seq    bigint      NOT NULL,
	type            text        NOT NULL,
	at              timestamptz NOT NULL,
	detail          text        NOT NULL DEFAULT '',
	PRIMARY KEY (user_id, position_commit, position_seq)
)`)
}

// Serve points the view activity at the version's table. Replacing the
// view waits for the reads of it in flight; reads that come meanwhile
// wait for the commit and then read the new version.
func (ActivityStore) Serve(ctx context.Context, t uow.Tx, v int) error {
	return activityExec(ctx, t, v, "serve", `CREATE OR REPLACE VIEW activity AS SELECT * FROM `+activityTable(v))
}

// Drop removes the version's table.
func (ActivityStore) Drop(ctx context.Context, t uow.Tx, v int) error {
	return activityExec(ctx, t, v, "drop", `DROP TABLE IF EXISTS `+activityTable(v))
}

// Reset empties the version's table in t.
func (ActivityStore) Reset(ctx context.Context, t uow.Tx, v int) error {
	return activityExec(ctx, t, v, "reset", `DELETE FROM `+activityTable(v))
}

// DeleteUser deletes the account's rows from the version's table.
func (ActivityStore) DeleteUser(ctx context.Context, t uow.Tx, v int, id uuid.UUID) error {
	return activityExec(ctx, t, v, "delete user", `DELETE FROM `+activityTable(v)+` WHERE user_id = $1`, id)
}

// Append adds rows to the version's table in one statement; a row recorded
// already is left as it is.
func (ActivityStore) Append(ctx context.Context, t uow.Tx, v int, rows ...user.ActivityRow) error {
	if len(rows) == 0 {
		return nil
	}
	ids, types, details := make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
	commits, seqs, ats := make([]int64, len(rows)), make([]int64, len(rows)), make([]time.Time, len(rows))
	for i, r := range rows {
		ids[i], types[i], details[i] = r.UserID.String(), r.Type, r.Detail
		commits[i], seqs[i], ats[i] = int64(r.Position.Commit), r.Position.Seq, r.At
	}
	return activityExec(ctx, t, v, "append", `INSERT INTO `+activityTable(v)+` (user_id, position_commit, position_seq, type, at, detail)
SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[], $6::text[])
ON CONFLICT DO NOTHING`, ids, commits, seqs, types, ats, details)
}

func activityExec(ctx context.Context, t uow.Tx, v int, op, q string, args ...any) error {
	stx, err := SQLTx(t)
	if err != nil {
		return fmt.Errorf("activity: %s: %w", op, err)
	}
	if _, err := stx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("activity: %s %s: %w", op, activityTable(v), unavailable(ctx, err))
	}
	return nil
}

// Page returns up to limit items of the account's activity older than
// before (the newest when before is nil), newest first, and whether more
// are older still.
func (a ActivityStore) Page(ctx context.Context, id uuid.UUID, before *eventstore.Position, limit int) ([]user.Activity, bool, error) {
	q, args := `SELECT type, at, detail, position_commit, position_seq FROM activity WHERE user_id = $1`, []any{id}
	if before != nil {
		q += ` AND (position_commit, position_seq) < ($3, $4)`
		args = append(args, limit+1, int64(before.Commit), before.Seq)
	} else {
		args = append(args, limit+1)
	}
	q += ` ORDER BY position_commit DESC, position_seq DESC LIMIT $2`
	rows, err := a.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("activity: page: %w", unavailable(ctx, err))
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (user.Activity, error) {
		var it user.Activity
		var commit int64
		err := row.Scan(&it.Type, &it.At, &it.Detail, &commit, &it.Position.Seq)
		it.Position.Commit, it.At = uint64(commit), it.At.UTC()
		return it, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("activity: page: %w", unavailable(ctx, err))
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	return items, more, nil
}
