package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v3/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/wakeup"
)

// LogConfig tunes the subscribers of a [Log]; its AckDeadline is 30s
// by default, watermill-sql's, and its BatchSize 500: each batch costs its
// round trips and a commit (catch-up 21,500-25,400 events/s here, against
// 12,200-14,400 with batches of 100).
type LogConfig = async.LogConfig

// Log is the [async.Log] of this backend: watermill-sql
// subscribers over the events table, through database/sql on pgx's stdlib
// over the DB's main pool.
//
// A subscriber reads the log again as soon as a unit of work of this
// process that appended events commits, and otherwise every PollInterval.
// Its schema adapter reads events in the order of [EventStore.ReadAll]
// (transaction id, then position) and only below the oldest transaction in
// flight (pg_snapshot_xmin, on the log's clock: see [DB.Migrate]), so it
// never passes over an event that could still commit behind it; it inserts
// nothing. Its offsets adapter keeps
// each group's position in projection_offsets, whose row a read locks (FOR
// UPDATE) until its batch commits, so two subscribers of one group take
// turns and never apply an event twice.
type Log struct {
	db      *sql.DB
	wake    *wakeup.Fanout
	cfg     LogConfig
	batches *async.Batches
}

var _ async.Log = (*Log)(nil)

// Log returns the event log as asynchronous projections follow it. Its
// subscribers use the DB's connections, and stop with [DB.Close].
func (db *DB) Log(cfg LogConfig) async.Log { return db.newLog(cfg) }

// newLog is [DB.Log] as its own type, for the projections of this package.
func (db *DB) newLog(cfg LogConfig) *Log {
	return &Log{db: db.logs, wake: db.logWake, cfg: cfg.WithDefaults(30*time.Second, 500), batches: &async.Batches{}}
}

// Subscriber returns a subscriber of the log for group, of events of types
// (all, when empty), as [async.Log] describes.
func (l *Log) Subscriber(group string, types []string, logger watermill.LoggerAdapter) (message.Subscriber, error) {
	if err := l.cfg.Validate(); err != nil {
		return nil, err
	}
	ackDeadline := l.cfg.AckDeadline
	wakeCtx, stop := context.WithCancel(context.Background())
	wake := l.wake.Subscribe(wakeCtx)
	s, err := wsql.NewSubscriber(l.db, wsql.SubscriberConfig{
		BackoffManager: async.WakeBackoff(wake.C(), l.cfg.PollInterval, l.cfg.RetryInterval, wakeCtx.Done()),
		ConsumerGroup:  group,
		AckDeadline:    &ackDeadline,
		PollInterval:   l.cfg.PollInterval,
		ResendInterval: l.cfg.ResendInterval,
		RetryInterval:  l.cfg.RetryInterval,
		SchemaAdapter:  logSchema{group: group, subscriber: uuid.NewString(), types: types, batch: l.cfg.BatchSize, batches: l.batches, arrays: pgtype.NewMap()},
		OffsetsAdapter: logOffsets{},
	}, logger)
	if err != nil {
		stop()
		return nil, fmt.Errorf("postgres: log subscriber %s: %w", group, err)
	}
	return async.StopWakeups(s, stop), nil
}

// savepoint is the name of the savepoint around one attempt of a handler.
const savepoint = "projection_apply"

// Apply applies msg's event with the rest of its batch, in a savepoint of
// the subscriber's transaction, and moves the group's offset there, as
// [async.Log] describes. PostgreSQL fails the whole transaction after
// one failed statement; rolling back to the savepoint mends that too.
func (l *Log) Apply(msg *message.Message, now time.Time, apply func(ctx context.Context, tx uow.Tx, events []eventstore.Event) error) error {
	ctx := msg.Context()
	stx, ok := wsql.TxFromContext(ctx)
	if !ok {
		return errors.New("postgres: apply: the message's context carries no subscriber transaction")
	}
	group := msg.Metadata.Get(async.MetadataGroup)
	return l.batches.Apply(msg, stx, func(events []eventstore.Event, through eventstore.Position) error {
		if _, err := stx.ExecContext(ctx, "SAVEPOINT "+savepoint); err != nil {
			return fmt.Errorf("postgres: apply: %w", unavailable(ctx, err))
		}
		var err error
		if len(events) > 0 {
			err = apply(ctx, &sqlTx{Tx: stx, now: now.UTC().Truncate(time.Microsecond)}, events)
		}
		if err == nil {
			q := advanceOffset(group, strconv.FormatUint(through.Commit, 10), through.Seq)
			if _, err = stx.ExecContext(ctx, q.Query, q.Args...); err != nil {
				err = fmt.Errorf("postgres: apply: offset: %w", unavailable(ctx, err))
			}
		}
		if err != nil {
			if _, rerr := stx.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT "+savepoint); rerr != nil {
				return errors.Join(err, fmt.Errorf("postgres: apply: roll back: %w", rerr))
			}
			return err
		}
		if _, err := stx.ExecContext(ctx, "RELEASE SAVEPOINT "+savepoint); err != nil {
			return fmt.Errorf("postgres: apply: %w", unavailable(ctx, err))
		}
		return nil
	})
}

// Behind counts the events group has still to apply, as
// [async.Log] describes: those after its offset, all of them for a
// group that has not subscribed yet, and those that sort before its offset
// but were added after it had passed their place (above its
// high_position), which a log in order never holds. Such events, and
// events beyond the log's clock, which no reader reaches, are counted and
// reported as an error wrapping [projections.ErrLogOrder].
//
// Each part of the count is bounded on both sides, besides its row
// comparison: PostgreSQL estimates a row comparison, or a bound on one
// side, at a large share of the table, and with the statistics of ten
// million events it read the whole table for a projection at the head of
// the log (a second or more, for each page of activity); a range with a
// bound it does not know yet it estimates as narrow, and keeps to the
// indexes. The events after the offset are found by events_log, from the
// offset to the log's last transaction. Those above high_position are
// found by events_position, a BRIN index, from high_position to the
// highest position there can be: a subquery that PostgreSQL plans apart
// (OFFSET 0) reads them by position alone, and the row comparison
// filters what it returns; planned together, the row comparison's bound
// on events_log looked cheaper, and read the whole index. The BRIN index
// leaves out the ranges of pages whose positions are all lower, once
// VACUUM has summarized them (migration 00021): the pages appended since
// are read whole.
func (l *Log) Behind(ctx context.Context, group string, types []string) (int64, time.Time, error) {
	wanted := `true`
	args := []any{group}
	if len(types) > 0 {
		wanted = `e.type = ANY($2)`
		args = append(args, types)
	}
	q := `
WITH o AS (
	SELECT last_transaction_id AS tx, last_position AS pos, high_position AS high
	FROM projection_offsets WHERE consumer_group = $1 AND retired_at IS NULL
	UNION ALL
	SELECT '0'::xid8, 0, 0 WHERE NOT EXISTS (SELECT 1 FROM projection_offsets WHERE consumer_group = $1)
), pending AS (
	SELECT e.transaction_id, e.recorded_at, false AS passed FROM events AS e
	WHERE (e.transaction_id, e.position) > ((SELECT tx FROM o), (SELECT pos FROM o))
	AND e.transaction_id BETWEEN (SELECT tx FROM o) AND (SELECT max(transaction_id) FROM events) AND ` + wanted + `
	UNION ALL
	SELECT e.transaction_id, e.recorded_at, true FROM (
		SELECT x.transaction_id, x.position, x.recorded_at, x.type FROM events AS x
		WHERE x.position > (SELECT high FROM o) AND x.position <= ` + maxBigint + `
		OFFSET 0) AS e
	WHERE (e.transaction_id, e.position) <= ((SELECT tx FROM o), (SELECT pos FROM o)) AND ` + wanted + `
)
SELECT count(*), min(recorded_at), count(*) FILTER (WHERE passed), count(*) FILTER (WHERE transaction_id >= ` + logNext + `)
FROM pending`
	var n, passed, beyond int64
	var oldest sql.NullTime
	if err := l.db.QueryRowContext(ctx, q, args...).Scan(&n, &oldest, &passed, &beyond); err != nil {
		return 0, time.Time{}, fmt.Errorf("postgres: behind %s: %w", group, unavailable(ctx, err))
	}
	var at time.Time
	if oldest.Valid {
		at = oldest.Time.UTC()
	}
	var err error
	if passed > 0 {
		err = fmt.Errorf("postgres: behind %s: %d events sort before its offset but came after it had passed them: %w", group, passed, projections.ErrLogOrder)
	}
	if beyond > 0 {
		err = errors.Join(err, fmt.Errorf("postgres: behind %s: %d events lie beyond this cluster's transaction ids, where no reader reaches them: %w", group, beyond, projections.ErrLogOrder))
	}
	return n, at, err
}

// Fail records that group stopped, as [async.Log] describes.
func (l *Log) Fail(ctx context.Context, group string, f projections.Failure) error {
	_, err := l.db.ExecContext(ctx, `
INSERT INTO projection_offsets (consumer_group, last_transaction_id, last_position, failed_at, failed_position, failed_error)
VALUES ($1, '0', 0, $2, $3, $4)
ON CONFLICT (consumer_group) DO UPDATE SET failed_at = $2, failed_position = $3, failed_error = $4`,
		group, f.At, projections.FormatPosition(f.Position), f.Error)
	if err != nil {
		return fmt.Errorf("postgres: fail %s: %w", group, unavailable(ctx, err))
	}
	return nil
}

// Failure returns the failure recorded for group.
func (l *Log) Failure(ctx context.Context, group string) (projections.Failure, bool, error) {
	var at sql.NullTime
	var pos, why sql.NullString
	err := l.db.QueryRowContext(ctx, `SELECT failed_at, failed_position, failed_error FROM projection_offsets WHERE consumer_group = $1`, group).
		Scan(&at, &pos, &why)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !at.Valid) {
		return projections.Failure{}, false, nil
	}
	if err != nil {
		return projections.Failure{}, false, fmt.Errorf("postgres: failure of %s: %w", group, unavailable(ctx, err))
	}
	p, err := projections.ParsePosition(pos.String)
	if err != nil {
		return projections.Failure{}, false, err
	}
	return projections.Failure{At: at.Time.UTC(), Position: p, Error: why.String}, true, nil
}

// Versions returns the registry's versions of name, as [async.Log]
// describes.
func (l *Log) Versions(ctx context.Context, name string, base int) (projections.Versions, error) {
	var v projections.Versions
	var building sql.NullInt64
	err := l.db.QueryRowContext(ctx, `SELECT serving, building FROM projection_versions WHERE name = $1`, name).Scan(&v.Serving, &building)
	if errors.Is(err, sql.ErrNoRows) {
		return projections.Versions{Serving: base}, nil
	}
	if err != nil {
		return v, fmt.Errorf("postgres: versions of %s: %w", name, unavailable(ctx, err))
	}
	v.Building = int(building.Int64)
	return v, nil
}

// Catalog runs fn in a transaction that holds name's row of the registry
// (FOR UPDATE), as [async.Log] describes. fn's Tx is the
// transaction's ([SQLTx]).
func (l *Log) Catalog(ctx context.Context, name string, base int, fn func(ctx context.Context, tx uow.Tx, v projections.Versions) (projections.Versions, error)) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres: catalog %s: %w", name, unavailable(ctx, err))
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT INTO projection_versions (name, serving) VALUES ($1, $2) ON CONFLICT DO NOTHING`, name, base); err != nil {
		return fmt.Errorf("postgres: catalog %s: %w", name, unavailable(ctx, err))
	}
	var v projections.Versions
	var building sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT serving, building FROM projection_versions WHERE name = $1 FOR UPDATE`, name).Scan(&v.Serving, &building); err != nil {
		return fmt.Errorf("postgres: catalog %s: %w", name, unavailable(ctx, err))
	}
	v.Building = int(building.Int64)
	next, err := fn(ctx, &sqlTx{Tx: tx, now: time.Now().UTC().Truncate(time.Microsecond)}, v)
	if err != nil {
		return err
	}
	building = sql.NullInt64{Int64: int64(next.Building), Valid: next.Building != 0}
	if _, err := tx.ExecContext(ctx, `UPDATE projection_versions SET serving = $2, building = $3 WHERE name = $1`, name, next.Serving, building); err != nil {
		return fmt.Errorf("postgres: catalog %s: %w", name, unavailable(ctx, err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres: catalog %s: commit: %w", name, unavailable(ctx, err))
	}
	return nil
}

// Forget removes group's offset in t, as [async.Log] describes: the
// DELETE waits for the row lock that a batch in flight holds, and a later
// batch finds no offset, and so no event after it.
func (l *Log) Forget(ctx context.Context, t uow.Tx, group string) error {
	stx, err := SQLTx(t)
	if err != nil {
		return err // It names the backend and the foreign transaction.
	}
	if _, err := stx.ExecContext(ctx, `DELETE FROM projection_offsets WHERE consumer_group = $1`, group); err != nil {
		return fmt.Errorf("postgres: forget %s: %w", group, unavailable(ctx, err))
	}
	return nil
}

// Retire retires group's offset in t, as [async.Log] describes: the
// upsert waits for the row lock that a batch in flight holds.
func (l *Log) Retire(ctx context.Context, t uow.Tx, group string) error {
	stx, err := SQLTx(t)
	if err != nil {
		return err // It names the backend and the foreign transaction.
	}
	_, err = stx.ExecContext(ctx, `
INSERT INTO projection_offsets (consumer_group, last_transaction_id, last_position, retired_at) VALUES ($1, '0', 0, now())
ON CONFLICT (consumer_group) DO UPDATE SET retired_at = now()`, group)
	if err != nil {
		return fmt.Errorf("postgres: retire %s: %w", group, unavailable(ctx, err))
	}
	return nil
}

// advanceOffset moves group's offset to the event at (txid, position),
// never backwards, and its high_position to the highest position of the
// events it has passed. The events passed now are read in the log's order,
// by a subquery with ORDER BY, through events_log: a plain max(position)
// over them was planned, while events_position was a btree, as a backward
// scan of it from the end of the log, filtered down to the window, which
// cost a scan of the rest of the log per batch while a projection caught
// up. The window's transaction ids are bounded besides, in plain
// comparisons: PostgreSQL estimates a range of row comparisons at several
// percent of the table whatever its width, and with the statistics of ten
// million events it read the whole table for every batch (a second each);
// the plain bounds it estimates as a narrow range, and it keeps to the
// index.
func advanceOffset(group, txid string, position int64) wsql.Query {
	return wsql.Query{
		Query: `UPDATE projection_offsets AS o SET last_transaction_id = $2::text::xid8, last_position = $3,
	high_position = greatest(o.high_position, coalesce((SELECT max(w.position) FROM (
		SELECT e.position FROM events AS e
		WHERE (e.transaction_id, e.position) > (o.last_transaction_id, o.last_position)
		AND (e.transaction_id, e.position) <= ($2::text::xid8, $3)
		AND e.transaction_id BETWEEN o.last_transaction_id AND $2::text::xid8
		ORDER BY e.transaction_id, e.position) AS w), 0)),
	failed_at = NULL, failed_position = NULL, failed_error = NULL
WHERE consumer_group = $1 AND (last_transaction_id, last_position) < ($2::text::xid8, $3)`,
		Args: []any{group, txid, position},
	}
}

// sqlTx is the [uow.Tx] of an asynchronous projection's writes: the
// subscriber's database/sql transaction.
type sqlTx struct {
	*sql.Tx
	now time.Time
}

func (t *sqlTx) Now() time.Time { return t.now }

// SQLTx returns the database/sql transaction of a [uow.Tx] that
// [Log.Apply] hands over, or an error wrapping [uow.ErrForeignTx].
func SQLTx(t uow.Tx) (*sql.Tx, error) {
	st, ok := t.(*sqlTx)
	if !ok || st == nil {
		return nil, uow.Foreign(pkg, t)
	}
	return st.Tx, nil
}

// logSchema is the watermill-sql schema adapter of the events table, for
// one consumer group.
type logSchema struct {
	group      string
	subscriber string
	types      []string
	batch      int
	// batches is told of each event read ([async.Batches.Read]).
	batches *async.Batches
	// arrays decodes a batch's columns; only the subscriber's one
	// goroutine uses it.
	arrays *pgtype.Map
}

var errReadOnlyLog = errors.New("postgres: the event log is written by the event store, not through watermill-sql")

func (logSchema) InsertQuery(string, message.Messages) (wsql.Query, error) {
	return wsql.Query{}, errReadOnlyLog
}

// SelectQuery reads the next window of the log after the group's offset,
// up to a batch of events of every type, locking the offset's row until the
// batch commits, and returns one row: the window's end, and its events of
// the group's types, a column of arrays each (empty when none is), so that
// the offset moves over the whole window whatever it holds. A log with
// nothing after the offset gives no row. (Arrays cost PostgreSQL a fifth of
// what a JSON array of the batch's events costs to build.)
//
// The window is read in the order of the index events_log with a LIMIT and
// nothing else, so the planner keeps to that index: with the filter on type
// under the LIMIT, it could not tell how far it would read, and, lacking
// statistics or expecting few events of the types, sorted the whole rest of
// the log for every batch. The offset is compared as two scalar subqueries,
// which the planner treats as parameters, so that the scan starts at the
// offset.
func (s logSchema) SelectQuery(_ string, group string, _ wsql.OffsetsAdapter) wsql.Query {
	wanted := `true`
	args := []any{group}
	if len(s.types) > 0 {
		wanted = `w.type = ANY($2)`
		args = append(args, s.types)
	}
	q := `
WITH last AS (
	SELECT last_transaction_id, last_position FROM projection_offsets WHERE consumer_group = $1 AND retired_at IS NULL FOR UPDATE
), win AS (
	SELECT e.position, e.transaction_id, e.id, e.stream_id, e.version, e.recorded_at, e.schema_version, e.type, e.data, e.correlation_id, e.causation_id, e.metadata
	FROM events AS e
	WHERE (e.transaction_id, e.position) > ((SELECT last_transaction_id FROM last), (SELECT last_position FROM last))
	AND e.transaction_id < ` + logHorizon + `
	ORDER BY e.transaction_id, e.position
	LIMIT ` + strconv.Itoa(s.batch) + `
), picked AS (
	SELECT w.*, s.name AS stream FROM win AS w LEFT JOIN event_streams AS s ON s.id = w.stream_id
	WHERE ` + wanted + ` ORDER BY w.transaction_id, w.position
)
SELECT b.transaction_id::text, b.position,
	coalesce(array_agg(p.transaction_id::text) FILTER (WHERE p.position IS NOT NULL), '{}'), coalesce(array_agg(p.position) FILTER (WHERE p.position IS NOT NULL), '{}'), coalesce(array_agg(p.id::text) FILTER (WHERE p.position IS NOT NULL), '{}'),
	coalesce(array_agg(p.stream) FILTER (WHERE p.position IS NOT NULL), '{}'), coalesce(array_agg(p.version) FILTER (WHERE p.position IS NOT NULL), '{}'), coalesce(array_agg(p.type) FILTER (WHERE p.position IS NOT NULL), '{}'),
	coalesce(array_agg(p.data::text) FILTER (WHERE p.position IS NOT NULL), '{}'), coalesce(array_agg(p.metadata::text) FILTER (WHERE p.position IS NOT NULL), '{}'), coalesce(array_agg(p.recorded_at) FILTER (WHERE p.position IS NOT NULL), '{}'),
	coalesce(array_agg(p.schema_version) FILTER (WHERE p.position IS NOT NULL), '{}'),
	coalesce(array_agg(p.correlation_id) FILTER (WHERE p.position IS NOT NULL), '{}'), coalesce(array_agg(p.causation_id) FILTER (WHERE p.position IS NOT NULL), '{}')
FROM (SELECT transaction_id, position FROM win ORDER BY transaction_id DESC, position DESC LIMIT 1) AS b
LEFT JOIN picked AS p ON true
GROUP BY b.transaction_id, b.position`
	return wsql.Query{Query: q, Args: args}
}

// UnmarshalMessage reads the row of [logSchema.SelectQuery] as the message
// of its batch, and hands its events to the log's Batches
// ([async.Batches.Read]).
func (s logSchema) UnmarshalMessage(row wsql.Scanner) (wsql.Row, error) {
	var endTxid string
	var end eventstore.Position
	var txids, ids, streams, types, data, metadata, correlations, causations []string
	var seqs, versions []int64
	var schemas []int32
	var recorded []time.Time
	m := s.arrays
	err := row.Scan(&endTxid, &end.Seq, m.SQLScanner(&txids), m.SQLScanner(&seqs), m.SQLScanner(&ids),
		m.SQLScanner(&streams), m.SQLScanner(&versions), m.SQLScanner(&types),
		m.SQLScanner(&data), m.SQLScanner(&metadata), m.SQLScanner(&recorded), m.SQLScanner(&schemas),
		m.SQLScanner(&correlations), m.SQLScanner(&causations))
	if err != nil {
		return wsql.Row{}, fmt.Errorf("postgres: log: %w", err)
	}
	if end.Commit, err = strconv.ParseUint(endTxid, 10, 64); err != nil {
		return wsql.Row{}, fmt.Errorf("postgres: log: transaction id %q: %w", endTxid, err)
	}
	n := len(seqs)
	if len(txids) != n || len(ids) != n || len(streams) != n || len(versions) != n || len(types) != n || len(data) != n || len(metadata) != n || len(recorded) != n || len(schemas) != n ||
		len(correlations) != n || len(causations) != n {
		return wsql.Row{}, errors.New("postgres: log: the columns of a batch differ in length")
	}
	events := make([]eventstore.Event, n)
	for i := range n {
		e := eventstore.Event{Stream: streams[i], Version: versions[i], Type: types[i], Data: []byte(data[i]),
			SchemaVersion: int(schemas[i]), RecordedAt: recorded[i].UTC(), Position: eventstore.Position{Seq: seqs[i]}}
		if e.Position.Commit, err = strconv.ParseUint(txids[i], 10, 64); err != nil {
			return wsql.Row{}, fmt.Errorf("postgres: log: transaction id %q: %w", txids[i], err)
		}
		if err := e.ID.UnmarshalText([]byte(ids[i])); err != nil {
			return wsql.Row{}, fmt.Errorf("postgres: log: id %q: %w", ids[i], err)
		}
		if metadata[i] != "{}" {
			if err := json.Unmarshal([]byte(metadata[i]), &e.Metadata); err != nil {
				return wsql.Row{}, fmt.Errorf("postgres: log: event %s metadata: %w", e.ID, err)
			}
		}
		e.Metadata.CorrelationID, e.Metadata.CausationID = correlations[i], causations[i]
		events[i] = e
	}
	// The arrays are aggregated in one pass, so they line up; their order
	// is the window's in practice, which SQL does not promise without a
	// sort per array (five times the query's cost), so it is made sure of
	// here.
	byPosition := func(a, b eventstore.Event) int {
		return cmp.Or(cmp.Compare(a.Position.Commit, b.Position.Commit), cmp.Compare(a.Position.Seq, b.Position.Seq))
	}
	if !slices.IsSortedFunc(events, byPosition) {
		slices.SortFunc(events, byPosition)
	}
	// The events go to Batches as read; the message carries none.
	msg := async.BatchMessage(s.group, s.subscriber, end)
	s.batches.Read(s.subscriber, msg.UUID, events)
	return wsql.Row{Offset: end.Seq, UUID: []byte(msg.UUID), Payload: msg.Payload, Msg: msg}, nil
}

// SchemaInitializingQueries returns none: the events table is the event
// store's, made by the migrations.
func (logSchema) SchemaInitializingQueries(string) []wsql.Query { return nil }

func (logSchema) SubscribeIsolationLevel() sql.IsolationLevel { return sql.LevelReadCommitted }

// logOffsets is the watermill-sql offsets adapter of projection_offsets.
type logOffsets struct{}

// AckMessageQuery changes nothing: only [Log.Apply] moves the offset,
// with the writes of the events it covers, so that events acknowledged but
// held back for their batch are never passed over.
func (logOffsets) AckMessageQuery(string, wsql.Row, string) wsql.Query {
	return wsql.Query{Query: `SELECT 1`}
}

func (logOffsets) ConsumedMessageQuery(string, wsql.Row, string, []byte) wsql.Query {
	return wsql.Query{}
}

func (logOffsets) NextOffsetQuery(_ string, group string) wsql.Query {
	return wsql.Query{
		Query: `SELECT last_transaction_id, last_position FROM projection_offsets WHERE consumer_group = $1 AND retired_at IS NULL FOR UPDATE`,
		Args:  []any{group},
	}
}

// SchemaInitializingQueries returns none: the migrations make
// projection_offsets.
func (logOffsets) SchemaInitializingQueries(string) []wsql.Query { return nil }

// BeforeSubscribingQueries adds the group's row at the start of the log,
// so that its first read has a row to lock.
func (logOffsets) BeforeSubscribingQueries(_ string, group string) []wsql.Query {
	return []wsql.Query{{
		Query: `INSERT INTO projection_offsets (consumer_group, last_transaction_id, last_position) VALUES ($1, '0', 0) ON CONFLICT DO NOTHING`,
		Args:  []any{group},
	}}
}
