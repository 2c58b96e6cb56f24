package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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
// in the transactions of an [EventLog] subscriber ([SQLTx]).
type Activity struct {
	user.ActivityProjection
	pool Querier
	log  *EventLog
	keys *keyring.Keyring
}

var _ projections.Rebuildable = Activity{}

// Activity returns the activity projection over db, at its first version,
// which opens the addresses of events with keys.
func (db *DB) Activity(keys *keyring.Keyring) Activity {
	return Activity{keys: keys, pool: db.main(), log: db.Log(LogConfig{})}
}

// At returns the projection writing version v.
func (a Activity) At(v int) projections.Rebuildable {
	a.ActivityProjection = a.ActivityProjection.AtVersion(v)
	return a
}

// Create makes the version's table, as migration 00005 made version 1's.
func (a Activity) Create(ctx context.Context, t uow.Tx) error {
	return a.exec(ctx, t, "create", `CREATE TABLE IF NOT EXISTS `+a.Table()+` (
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
func (a Activity) Serve(ctx context.Context, t uow.Tx) error {
	return a.exec(ctx, t, "serve", `CREATE OR REPLACE VIEW activity AS SELECT * FROM `+a.Table())
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
	stx, err := SQLTx(t)
	if err != nil {
		return fmt.Errorf("activity: %s: %w", op, err)
	}
	if _, err := stx.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("activity: %s %s: %w", op, a.Table(), unavailable(ctx, err))
	}
	return nil
}

// Apply records the activity of events in t, a subscriber's transaction.
// An event recorded already is left as it is ([projections.Projection]).
func (a Activity) Apply(ctx context.Context, t uow.Tx, events ...eventstore.Event) error {
	stx, err := SQLTx(t)
	if err != nil {
		return fmt.Errorf("activity: apply: %w", err)
	}
	// One statement for all of them, an asynchronous projection being
	// handed a batch at a time, or for those before an erasure, which
	// deletes the account's rows after them.
	var ids, types, details []string
	var commits, seqs []int64
	var ats []time.Time
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		_, err := stx.ExecContext(ctx, `INSERT INTO `+a.Table()+` (user_id, position_commit, position_seq, type, at, detail)
SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[], $6::text[])
ON CONFLICT DO NOTHING`,
			ids, commits, seqs, types, ats, details)
		ids, types, details, commits, seqs, ats = nil, nil, nil, nil, nil, nil
		return err
	}
	err = user.EachActivity(ctx, t, a.keys, events, func(id uuid.UUID, a user.Activity) error {
		ids, types, details = append(ids, id.String()), append(types, a.Type), append(details, a.Detail)
		commits, seqs, ats = append(commits, int64(a.Position.Commit)), append(seqs, a.Position.Seq), append(ats, a.At)
		return nil
	}, func(id uuid.UUID) error {
		if err := flush(); err != nil {
			return err
		}
		_, err := stx.ExecContext(ctx, `DELETE FROM `+a.Table()+` WHERE user_id = $1`, id)
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

// Behind counts the events of the projection's types in the log that the
// version serving reads has not applied yet.
func (a Activity) Behind(ctx context.Context) (int64, error) {
	return projections.ServingBehind(ctx, a.log, a)
}
