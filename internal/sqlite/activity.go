package sqlite

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// Activity is the asynchronous projection "activity" of this backend, and
// the reads of it: what happened to each account, newest first. Its writes
// run in the transactions of the log's subscriber; its reads on the read
// pool.
type Activity struct {
	user.ActivityProjection
	db *DB
}

var _ projections.Projection = Activity{}

// Activity returns the activity projection over db.
func (db *DB) Activity() Activity { return Activity{db: db} }

// Reset empties the projection in t.
func (Activity) Reset(ctx context.Context, t uow.Tx) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("activity: reset: %w", err)
	}
	if _, err := st.ExecContext(ctx, `DELETE FROM activity_v1`); err != nil {
		return fmt.Errorf("activity: reset: %w", err)
	}
	return nil
}

// Apply records the activity of events in t.
func (Activity) Apply(ctx context.Context, t uow.Tx, events ...eventstore.Event) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("activity: apply: %w", err)
	}
	// One statement for all of them: an asynchronous projection is handed
	// a batch at a time.
	var args []any
	err = user.EachActivity(events, func(id uuid.UUID, a user.Activity) error {
		args = append(args, id.String(), a.Position.Seq, a.Type, micros(a.At), a.Detail)
		return nil
	})
	if err == nil && len(args) > 0 {
		_, err = st.ExecContext(ctx, `INSERT INTO activity_v1 (user_id, position, type, at, detail) VALUES `+valueRows(len(args)/5, 5), args...)
	}
	if err != nil {
		return fmt.Errorf("activity: apply: %w", err)
	}
	return nil
}

// Page returns up to limit items of the account's activity older than
// before (the newest when before is nil), newest first, and whether more
// are older still.
func (a Activity) Page(ctx context.Context, id uuid.UUID, before *eventstore.Position, limit int) ([]user.Activity, bool, error) {
	q, args := `SELECT type, at, detail, position FROM activity_v1 WHERE user_id = ?`, []any{id.String()}
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
// not applied yet.
func (a Activity) Behind(ctx context.Context) (int64, error) {
	n, _, err := a.db.Log(LogConfig{}).Behind(ctx, projections.Group(a), a.Types())
	return n, err
}
