package sqlite

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// Activity is the asynchronous projection "activity" of this backend, and
// the reads of it: what happened to each account, newest first. Version v
// keeps its rows in the table activity_vv; reads query the view activity,
// of the version that serves ([projections.Rebuildable]). Its writes run
// in the transactions of the log's subscriber; its reads on the read pool.
type Activity struct {
	user.ActivityProjection
	db   *DB
	log  *Log
	keys *keyring.Keyring
}

var _ projections.Rebuildable = Activity{}

// Activity returns the activity projection over db, at its first version,
// which opens the addresses of events with keys.
func (db *DB) Activity(keys *keyring.Keyring) Activity {
	return Activity{keys: keys, db: db, log: db.Log(LogConfig{})}
}

// At returns the projection writing version v.
func (a Activity) At(v int) projections.Rebuildable {
	a.ActivityProjection = a.ActivityProjection.AtVersion(v)
	return a
}

// Create makes the version's table, as migration 00005 made version 1's.
func (a Activity) Create(ctx context.Context, t uow.Tx) error {
	return a.exec(ctx, t, "create", `CREATE TABLE IF NOT EXISTS `+a.Table()+` (
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
func (a Activity) Serve(ctx context.Context, t uow.Tx) error {
	if err := a.exec(ctx, t, "serve", `DROP VIEW IF EXISTS activity`); err != nil {
		return err
	}
	return a.exec(ctx, t, "serve", `CREATE VIEW activity AS SELECT * FROM `+a.Table())
}

// Drop removes the version's table.
func (a Activity) Drop(ctx context.Context, t uow.Tx) error {
	return a.exec(ctx, t, "drop", `DROP TABLE IF EXISTS `+a.Table())
}

// Reset empties the version's table in t.
func (a Activity) Reset(ctx context.Context, t uow.Tx) error {
	return a.exec(ctx, t, "reset", `DELETE FROM `+a.Table())
}

func (a Activity) exec(ctx context.Context, t uow.Tx, op, q string) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("activity: %s: %w", op, err)
	}
	if _, err := st.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("activity: %s %s: %w", op, a.Table(), unavailable(ctx, err))
	}
	return nil
}

// Apply records the activity of events in t. An event recorded already is
// left as it is ([projections.Projection]).
func (a Activity) Apply(ctx context.Context, t uow.Tx, events ...eventstore.Event) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("activity: apply: %w", err)
	}
	// One statement for all of them, an asynchronous projection being
	// handed a batch at a time, or for those before an erasure, which
	// deletes the account's rows after them.
	var args []any
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		_, err := st.ExecContext(ctx, `INSERT INTO `+a.Table()+` (user_id, position, type, at, detail) VALUES `+valueRows(len(args)/5, 5)+` ON CONFLICT DO NOTHING`, args...)
		args = nil
		return err
	}
	err = user.EachActivity(ctx, t, a.keys, events, func(id uuid.UUID, a user.Activity) error {
		args = append(args, id.String(), a.Position.Seq, a.Type, micros(a.At), a.Detail)
		return nil
	}, func(id uuid.UUID) error {
		if err := flush(); err != nil {
			return err
		}
		_, err := st.ExecContext(ctx, `DELETE FROM `+a.Table()+` WHERE user_id = ?`, id.String())
		return err
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("activity: apply: %w", unavailable(ctx, err))
	}
	return nil
}

// Page returns up to limit items of the account's activity older than
// before (the newest when before is nil), newest first, and whether more
// are older still.
func (a Activity) Page(ctx context.Context, id uuid.UUID, before *eventstore.Position, limit int) ([]user.Activity, bool, error) {
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

// Behind counts the events of the projection's types in the log that it has
// Behind counts the events of the projection's types in the log that the
// version serving reads has not applied yet.
func (a Activity) Behind(ctx context.Context) (int64, error) {
	return projections.ServingBehind(ctx, a.log, a)
}
