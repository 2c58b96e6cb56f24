package sqlite

import (
	"context"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// ActivityStore is the activity read model on SQLite
// ([user.ActivityStore]): what happened to each account, newest first.
// Version v keeps its rows in the table activity_vv; reads query the view
// activity, of the version that serves. Its writes run in the transactions
// of the log's subscriber; its reads on the read pool.
type ActivityStore struct {
	db *DB
}

var _ user.ActivityStore = ActivityStore{}

// ActivityStore returns the tables of the activity projection over db.
func (db *DB) ActivityStore() user.ActivityStore { return ActivityStore{db: db} }

// activityTable names the table of version v: activity_v1 for version 1,
// which migration 00005 makes.
func activityTable(v int) string { return "activity_v" + strconv.Itoa(v) }

// Create makes the version's table, as migration 00005 made version 1's.
func (ActivityStore) Create(ctx context.Context, t uow.Tx, v int) error {
	return activityExec(ctx, t, v, "create", `CREATE TABLE IF NOT EXISTS `+activityTable(v)+` (
	user_id  TEXT    NOT NULL,
	position INTEGER NOT NULL,
	type     TEXT    NOT NULL,
	at       INTEGER NOT NULL,
	detail   TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (user_id, position)
) STRICT, WITHOUT ROWID`)
}

// Serve points the view activity at the version's table. Readers see the
// file as of the start of their read, so a read in flight finishes on the
// version it began on.
func (ActivityStore) Serve(ctx context.Context, t uow.Tx, v int) error {
	if err := activityExec(ctx, t, v, "serve", `DROP VIEW IF EXISTS activity`); err != nil {
		return err
	}
	return activityExec(ctx, t, v, "serve", `CREATE VIEW activity AS SELECT * FROM `+activityTable(v))
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
	return activityExec(ctx, t, v, "delete user", `DELETE FROM `+activityTable(v)+` WHERE user_id = ?`, id.String())
}

// Append adds rows to the version's table in one statement; a row recorded
// already is left as it is. The log's positions on SQLite are its
// sequence numbers alone.
func (ActivityStore) Append(ctx context.Context, t uow.Tx, v int, rows ...user.ActivityRow) error {
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, 5*len(rows))
	for _, r := range rows {
		args = append(args, r.UserID.String(), r.Position.Seq, r.Type, micros(r.At), r.Detail)
	}
	return activityExec(ctx, t, v, "append", `INSERT INTO `+activityTable(v)+` (user_id, position, type, at, detail) VALUES `+
		valueRows(len(rows), 5)+` ON CONFLICT DO NOTHING`, args...)
}

func activityExec(ctx context.Context, t uow.Tx, v int, op, q string, args ...any) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("activity: %s: %w", op, err)
	}
	if _, err := st.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("activity: %s %s: %w", op, activityTable(v), unavailable(ctx, err))
	}
	return nil
}

// Page returns up to limit items of the account's activity older than
// before (the newest when before is nil), newest first, and whether more
// are older still.
func (a ActivityStore) Page(ctx context.Context, id uuid.UUID, before *eventstore.Position, limit int) ([]user.Activity, bool, error) {
	q, args := `SELECT type, at, detail, position FROM activity WHERE user_id = ?`, []any{id.String()}
	if before != nil {
		q, args = q+` AND position < ?`, append(args, before.Seq)
	}
	rows, err := a.db.read.QueryContext(ctx, q+` ORDER BY position DESC LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, false, fmt.Errorf("activity: page: %w", unavailable(ctx, err))
	}
	defer rows.Close()
	var items []user.Activity
	for rows.Next() {
		var it user.Activity
		var at int64
		if err := rows.Scan(&it.Type, &at, &it.Detail, &it.Position.Seq); err != nil {
			return nil, false, fmt.Errorf("activity: page: %w", err)
		}
		it.At = fromMicros(at)
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("activity: page: %w", unavailable(ctx, err))
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	return items, more, nil
}
