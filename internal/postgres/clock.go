package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The event log's clock: an event's place is the id of the transaction
// that appended it plus the shift that event_log_clock keeps (migration
// 00014), so that a log copied into another cluster whose transaction ids
// run lower goes on in order without a change to any event or offset.
const (
	// logHorizon is the place below which every event of the log has
	// committed: the oldest transaction in flight, on the log's clock.
	logHorizon = `(SELECT (pg_snapshot_xmin(pg_current_snapshot())::text::bigint + xid_shift)::text::xid8 FROM event_log_clock)`
	// logNext is the first place on the log's clock that no transaction
	// of this cluster has taken yet. An event at or above it came from
	// another cluster, and no reader reaches it until the clock moves.
	logNext = `(SELECT (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + xid_shift)::text::xid8 FROM event_log_clock)`
	// maxPosition is the highest position of the log's events, NULL when
	// it has none. events_position is a BRIN index, which a max() cannot
	// read from its end: the highest position is at least that of the
	// log's last event, which events_log finds, and the BRIN index finds
	// the few blocks that hold a position as high. The upper bound makes
	// PostgreSQL estimate the range as narrow, and keep to the index.
	maxPosition = `(SELECT max(position) FROM events
	WHERE position >= (SELECT position FROM events ORDER BY transaction_id DESC, position DESC LIMIT 1)
	AND position <= ` + maxBigint + `)`
	// maxBigint is the highest bigint, an upper bound of every position.
	maxBigint = `9223372036854775807`
)

// clockMove is what [DB.Migrate] found and did when the database had come
// to another cluster than the one its event log's clock was set on.
type clockMove struct {
	// FromSystem and ToSystem are the system identifiers of the cluster
	// the clock was set on and of this one; 0 when unknown.
	FromSystem, ToSystem int64
	// FromShift and ToShift are the clock's shift before and after.
	FromShift, ToShift int64
	// Sequences names the sequences that ran below the rows they number,
	// and were set to their highest (logical replication copies no
	// sequence).
	Sequences []string
}

// clockProbe is what a start reads of the clock, without a lock.
type clockProbe struct {
	shift    int64
	recorded *int64
	system   *int64
	// ahead is whether the log holds events beyond the clock; behind is
	// whether a sequence runs below the rows it numbers.
	ahead, behind bool
}

// moved reports whether the database has come to another cluster, or
// holds what one would leave: events beyond the clock, a sequence behind.
func (p clockProbe) moved() bool {
	return p.ahead || p.behind || (p.system != nil && p.recorded != nil && *p.system != *p.recorded)
}

// alignClock keeps the event log in order on the cluster it runs on now:
// when the database was copied logically from another cluster, whose
// transaction ids ran above this one's, it moves the clock on so that the
// log's new events follow the copied ones, and brings the sequences of
// event positions and outbox messages up to their rows. It is quick and
// takes no lock when nothing moved, which is every start but the first
// after a copy. It returns nil when it changed nothing.
//
// Several instances may start at once: each that finds the database moved
// takes the events table's exclusive lock, which waits for every
// transaction that reads or appends to the log, and decides again under
// it; the first moves the clock and the others then find nothing to do.
func (db *DB) alignClock(ctx context.Context) (*clockMove, error) {
	p, err := db.probeClock(ctx)
	if err != nil {
		return nil, err
	}
	if !p.moved() {
		if p.recorded == nil && p.system != nil {
			if _, err := db.main().Exec(ctx, `UPDATE event_log_clock SET system_identifier = $1 WHERE system_identifier IS NULL`, *p.system); err != nil {
				return nil, fmt.Errorf("postgres: event log clock: %w", unavailable(ctx, err))
			}
		}
		return nil, nil
	}
	var move *clockMove
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		// Behind a transaction pooler the schema, among other settings,
		// is set in each transaction.
		if db.local != nil {
			if _, err := tx.Exec(ctx, db.local.sql, db.local.args...); err != nil {
				return err
			}
		}
		var err error
		move, err = moveClock(ctx, tx, p.system)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: the event log came from another cluster, and its clock could not move on (run `app migrate` as the owner of the tables): %w", unavailable(ctx, err))
	}
	return move, nil
}

// probeClock reads the clock and what would show that the database came
// from another cluster.
func (db *DB) probeClock(ctx context.Context) (clockProbe, error) {
	var p clockProbe
	err := db.main().QueryRow(ctx, `
SELECT c.xid_shift, c.system_identifier,
	coalesce((SELECT max(transaction_id) FROM events) >= `+logNext+`, false),
	coalesce(`+maxPosition+` > coalesce(pg_sequence_last_value(pg_get_serial_sequence('events', 'position')::regclass), 0), false)
	OR coalesce((SELECT max(seq) FROM outbox_messages) > coalesce(pg_sequence_last_value(pg_get_serial_sequence('outbox_messages', 'seq')::regclass), 0), false)
FROM event_log_clock AS c`).Scan(&p.shift, &p.recorded, &p.ahead, &p.behind)
	if err != nil {
		return p, fmt.Errorf("postgres: event log clock: %w", unavailable(ctx, err))
	}
	p.system, err = systemIdentifier(ctx, db.main())
	return p, err
}

// systemIdentifier returns the cluster's system identifier, or nil when
// the role may not read it (some managed services refuse
// pg_control_system): the clock then goes by transaction ids alone.
func systemIdentifier(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (*int64, error) {
	var id int64
	err := q.QueryRow(ctx, `SELECT system_identifier FROM pg_control_system()`).Scan(&id)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: system identifier: %w", unavailable(ctx, err))
	}
	return &id, nil
}

// moveClock decides again, in tx and under the events table's exclusive
// lock, and moves the clock: when the log holds events at or above the
// next transaction id of this cluster on the clock, the shift becomes
// such that the oldest transaction in flight, and so every later one,
// comes after the log's last event. The column's default moves with it
// in tx. Sequences that run below their rows are set to their highest.
func moveClock(ctx context.Context, tx pgx.Tx, system *int64) (*clockMove, error) {
	// The lock waits for every transaction that appended events, or reads
	// them, to end, and holds new ones until tx commits: none appends at
	// the old clock after it. A session that holds the table for longer
	// than the lock timeout (one idle in a transaction, a long report)
	// fails this start rather than stall every append queued behind the
	// lock; the next start tries again. Inserts into the outbox wait too,
	// so that no nextval of its sequence comes between the check of its
	// rows and its setval.
	if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', '10s', true)`); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`); err != nil {
		return nil, fmt.Errorf("lock the events: %w", err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE outbox_messages IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return nil, fmt.Errorf("lock the outbox: %w", err)
	}
	var shift int64
	var recorded *int64
	var last *string
	var xmin, xmax string
	err := tx.QueryRow(ctx, `
SELECT c.xid_shift, c.system_identifier, (SELECT max(transaction_id) FROM events)::text,
	pg_snapshot_xmin(pg_current_snapshot())::text, pg_snapshot_xmax(pg_current_snapshot())::text
FROM event_log_clock AS c FOR UPDATE OF c`).Scan(&shift, &recorded, &last, &xmin, &xmax)
	if err != nil {
		return nil, err
	}
	move := &clockMove{FromShift: shift, ToShift: shift}
	if recorded != nil {
		move.FromSystem = *recorded
	}
	if system != nil {
		move.ToSystem = *system
	}
	if last != nil {
		lastID, err1 := strconv.ParseInt(*last, 10, 64)
		xminID, err2 := strconv.ParseInt(xmin, 10, 64)
		xmaxID, err3 := strconv.ParseInt(xmax, 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("transaction ids: %w", err)
		}
		if lastID >= xmaxID+shift {
			move.ToShift = lastID + 1 - xminID
		}
	}
	if move.ToShift != move.FromShift {
		def := `pg_current_xact_id()`
		if move.ToShift > 0 {
			def = `(pg_current_xact_id()::text::bigint + ` + strconv.FormatInt(move.ToShift, 10) + `)::text::xid8`
		}
		if _, err := tx.Exec(ctx, `ALTER TABLE events ALTER COLUMN transaction_id SET DEFAULT `+def); err != nil {
			return nil, err
		}
	}
	for _, col := range [][3]string{{"events", "position", maxPosition}, {"outbox_messages", "seq", `(SELECT max(seq) FROM outbox_messages)`}} {
		var name *string
		err := tx.QueryRow(ctx, `
SELECT s FROM (SELECT pg_get_serial_sequence($1, $2) AS s, `+col[2]+` AS m) AS x
WHERE CASE WHEN m > coalesce(pg_sequence_last_value(s::regclass), 0) THEN setval(s, m) = m ELSE false END`, col[0], col[1]).Scan(&name)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return nil, err
		default:
			move.Sequences = append(move.Sequences, *name)
		}
	}
	if move.ToShift == move.FromShift && len(move.Sequences) == 0 && (system == nil || (recorded != nil && *recorded == *system)) {
		return nil, nil // Another instance moved it first.
	}
	if _, err := tx.Exec(ctx, `UPDATE event_log_clock SET xid_shift = $1, system_identifier = coalesce($2, system_identifier), moved_at = now()`, move.ToShift, system); err != nil {
		return nil, err
	}
	return move, nil
}
