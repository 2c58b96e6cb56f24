package sqlite

import (
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

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/uow"
)

// LogConfig configures the subscribers of a [Log]. Its AckDeadline is 5s
// by default: a subscriber holds SQLite's write lock for its whole batch, so
// every unit of work waits while a handler runs, and the default lies below
// the busy timeout, after which they would fail.
type LogConfig = async.LogConfig

// The defaults of [LogConfig] on this backend: an ack deadline below the
// busy timeout, and batches of 500 events (about 20 ms of the write lock;
// catch-up 22,800-27,000 events/s here, against 20,600-23,000 with
// batches of 100).
const (
	ackDeadline = 5 * time.Second
	batchSize   = 500
)

// Log is the [async.Log] of this backend: the events table as
// watermill-sql's subscriber follows it, with each consumer group's
// offset in the table projection_offsets.
//
// A subscriber reads a batch of events after its group's offset, in
// position order, which on SQLite is commit order, and applies them in one
// transaction that begins with BEGIN IMMEDIATE: it holds the write lock
// from its read of the offset to its commit, so no other transaction can
// commit in between and make its write of the offset fail, and two
// subscribers of one group, in this process or another, take turns. While
// a batch is applied every other writer of the file waits, units of work
// in SQLite's busy handler; [LogConfig.AckDeadline] bounds that wait.
//
// Subscribers run on a pool of their own, with one connection, so the
// subscribers of one process queue for it in Go.
type Log struct {
	db      *DB
	pool    *sql.DB
	cfg     LogConfig
	batches *async.Batches
}

var _ async.Log = (*Log)(nil)

// Log returns the event log of db as asynchronous projections follow it.
// Its subscribers use a pool that [DB.Close] closes: close their routers
// first.
func (db *DB) Log(cfg LogConfig) async.Log { return newLog(db, db.logs, cfg) }

// newLog returns the Log of db whose subscribers run on pool, a pool on
// db's file opened as [openLogPool] opens it.
func newLog(db *DB, pool *sql.DB, cfg LogConfig) *Log {
	cfg = cfg.WithDefaults(ackDeadline, batchSize)
	return &Log{db: db, pool: pool, cfg: cfg, batches: &async.Batches{}}
}

// openLogPool opens the pool of the subscribers of [DB.Log] on dsn, whose
// transactions begin IMMEDIATE.
func openLogPool(dsn string) (*sql.DB, error) {
	pool, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	limitLogPool(pool)
	return pool, nil
}

// limitLogPool gives pool the one connection of a Log's pool.
func limitLogPool(pool *sql.DB) {
	pool.SetMaxOpenConns(1)
	pool.SetMaxIdleConns(1)
	pool.SetConnMaxLifetime(0)
	pool.SetConnMaxIdleTime(0)
}

// Subscriber returns a subscriber of [async.Topic] for group, as
// [async.Log] describes. group must not be empty. Subscribing puts
// the group's row, at offset 0, into projection_offsets unless it is there.
func (l *Log) Subscriber(group string, types []string, logger watermill.LoggerAdapter) (message.Subscriber, error) {
	if group == "" {
		return nil, errors.New("sqlite: log subscriber: empty consumer group")
	}
	if err := l.cfg.Validate(); err != nil {
		return nil, err
	}
	schema := logSchema{group: group, subscriber: uuid.NewString(), batchSize: l.cfg.BatchSize, batches: l.batches}
	if len(types) > 0 {
		list, err := json.Marshal(types)
		if err != nil {
			return nil, fmt.Errorf("sqlite: log subscriber %s: %w", group, err)
		}
		schema.types = string(list)
	}
	ackDeadline := l.cfg.AckDeadline
	wakeCtx, stop := context.WithCancel(context.Background())
	wake := l.db.logWake.Subscribe(wakeCtx)
	sub, err := wsql.NewSubscriber(l.pool, wsql.SubscriberConfig{
		BackoffManager: async.WakeBackoff(wake.C(), l.cfg.PollInterval, l.cfg.RetryInterval, wakeCtx.Done()),
		ConsumerGroup:  group,
		AckDeadline:    &ackDeadline,
		PollInterval:   l.cfg.PollInterval,
		ResendInterval: l.cfg.ResendInterval,
		RetryInterval:  l.cfg.RetryInterval,
		SchemaAdapter:  schema,
		OffsetsAdapter: logOffsets{},
	}, logger)
	if err != nil {
		stop()
		return nil, fmt.Errorf("sqlite: log subscriber %s: %w", group, err)
	}
	return async.StopWakeups(logSubscriber{sub}, stop), nil
}

// Apply runs fn in the transaction of the subscriber that delivered the
// message whose context ctx is, inside a savepoint, as [async.Log]
// describes. fn's Tx is a [uow.Tx] of this backend, so this package's
// stores write through it, with now, in UTC and to the microsecond, as its
// time. An error of fn rolls back to the savepoint and is returned; a ctx
// that carries no subscriber's transaction is an error and runs nothing.
//
// The transaction holds the write lock of the file, so fn must not write
// through another transaction of the same DB, such as a unit of work of
// [Runner.Do]: with the context it is given, that returns an error instead
// of waiting. The transaction runs no after-commit hooks: messages that fn
// adds to the outbox are delivered, but do not wake this process's relays.
func (l *Log) Apply(msg *message.Message, now time.Time, apply func(ctx context.Context, tx uow.Tx, events []eventstore.Event) error) error {
	ctx := msg.Context()
	stx, ok := wsql.TxFromContext(ctx)
	if !ok {
		return errors.New("sqlite: apply: the context carries no transaction of a log subscriber")
	}
	group := msg.Metadata.Get(async.MetadataGroup)
	return l.batches.Apply(msg, stx, func(events []eventstore.Event, through eventstore.Position) error {
		if _, err := stx.ExecContext(ctx, `SAVEPOINT apply`); err != nil {
			return fmt.Errorf("sqlite: apply: %w", unavailable(ctx, err))
		}
		var err error
		if len(events) > 0 {
			t := &tx{Tx: stx, db: l.db, now: now.UTC().Truncate(time.Microsecond)}
			err = apply(context.WithValue(ctx, unitOfWorkKey{}, l.db), t, events)
		}
		if err == nil {
			q := advanceOffset(group, through.Seq)
			if _, err = stx.ExecContext(ctx, q.Query, q.Args...); err != nil {
				err = fmt.Errorf("sqlite: apply: offset: %w", unavailable(ctx, err))
			}
		}
		if err != nil {
			_, rbErr := stx.ExecContext(context.WithoutCancel(ctx), `ROLLBACK TO apply`)
			_, relErr := stx.ExecContext(context.WithoutCancel(ctx), `RELEASE apply`)
			if rbErr != nil || relErr != nil {
				return errors.Join(err, fmt.Errorf("sqlite: apply: undo: %w", errors.Join(rbErr, relErr)))
			}
			return err
		}
		if _, err := stx.ExecContext(ctx, `RELEASE apply`); err != nil {
			return fmt.Errorf("sqlite: apply: %w", unavailable(ctx, err))
		}
		return nil
	})
}

// Behind counts the events group has still to apply, as
// [async.Log] describes, on the read pool.
func (l *Log) Behind(ctx context.Context, group string, types []string) (int64, time.Time, error) {
	q := `
SELECT count(*), min(recorded_at) FROM events
WHERE NOT EXISTS (SELECT 1 FROM projection_offsets WHERE consumer_group = ?1 AND retired_at IS NOT NULL)
AND position > coalesce((SELECT last_position FROM projection_offsets WHERE consumer_group = ?1), 0)`
	args := []any{group}
	if len(types) > 0 {
		list, err := json.Marshal(types)
		if err != nil {
			return 0, time.Time{}, fmt.Errorf("sqlite: behind %s: %w", group, err)
		}
		q += ` AND type IN (SELECT value FROM json_each(?))`
		args = append(args, string(list))
	}
	var n int64
	var oldest sql.NullInt64
	if err := l.db.read.QueryRowContext(ctx, q, args...).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("sqlite: behind %s: %w", group, unavailable(ctx, err))
	}
	if !oldest.Valid {
		return n, time.Time{}, nil
	}
	return n, fromMicros(oldest.Int64), nil
}

// Fail records that group stopped, as [async.Log] describes, on a
// connection of the log's pool of its own.
func (l *Log) Fail(ctx context.Context, group string, f projections.Failure) error {
	_, err := l.pool.ExecContext(ctx, `
INSERT INTO projection_offsets (consumer_group, last_position, failed_at, failed_position, failed_error)
VALUES (?1, 0, ?2, ?3, ?4)
ON CONFLICT (consumer_group) DO UPDATE SET failed_at = ?2, failed_position = ?3, failed_error = ?4`,
		group, micros(f.At), projections.FormatPosition(f.Position), f.Error)
	if err != nil {
		return fmt.Errorf("sqlite: fail %s: %w", group, unavailable(ctx, err))
	}
	return nil
}

// Failure returns the failure recorded for group, on the read pool.
func (l *Log) Failure(ctx context.Context, group string) (projections.Failure, bool, error) {
	var at sql.NullInt64
	var pos, why sql.NullString
	err := l.db.read.QueryRowContext(ctx, `SELECT failed_at, failed_position, failed_error FROM projection_offsets WHERE consumer_group = ?`, group).
		Scan(&at, &pos, &why)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !at.Valid) {
		return projections.Failure{}, false, nil
	}
	if err != nil {
		return projections.Failure{}, false, fmt.Errorf("sqlite: failure of %s: %w", group, unavailable(ctx, err))
	}
	p, err := projections.ParsePosition(pos.String)
	if err != nil {
		return projections.Failure{}, false, err
	}
	return projections.Failure{At: fromMicros(at.Int64), Position: p, Error: why.String}, true, nil
}

// Versions returns the registry's versions of name, as [async.Log]
// describes, on the read pool.
func (l *Log) Versions(ctx context.Context, name string, base int) (projections.Versions, error) {
	var v projections.Versions
	var building sql.NullInt64
	err := l.db.read.QueryRowContext(ctx, `SELECT serving, building FROM projection_versions WHERE name = ?`, name).Scan(&v.Serving, &building)
	if errors.Is(err, sql.ErrNoRows) {
		return projections.Versions{Serving: base}, nil
	}
	if err != nil {
		return v, fmt.Errorf("sqlite: versions of %s: %w", name, unavailable(ctx, err))
	}
	v.Building = int(building.Int64)
	return v, nil
}

// Catalog runs fn in a transaction of the log's pool, as [async.Log]
// describes: it begins IMMEDIATE, so it holds the write lock, and with it
// the registry, until it commits. fn's Tx is a [uow.Tx] of this backend.
func (l *Log) Catalog(ctx context.Context, name string, base int, fn func(ctx context.Context, tx uow.Tx, v projections.Versions) (projections.Versions, error)) error {
	stx, err := l.pool.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: catalog %s: %w", name, unavailable(ctx, err))
	}
	defer func() { _ = stx.Rollback() }()
	var v projections.Versions
	var building sql.NullInt64
	err = stx.QueryRowContext(ctx, `
INSERT INTO projection_versions (name, serving) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET serving = serving
RETURNING serving, building`, name, base).Scan(&v.Serving, &building)
	if err != nil {
		return fmt.Errorf("sqlite: catalog %s: %w", name, unavailable(ctx, err))
	}
	v.Building = int(building.Int64)
	t := &tx{Tx: stx, db: l.db, now: time.Now().UTC().Truncate(time.Microsecond)}
	next, err := fn(context.WithValue(ctx, unitOfWorkKey{}, l.db), t, v)
	if err != nil {
		return err
	}
	building = sql.NullInt64{Int64: int64(next.Building), Valid: next.Building != 0}
	if _, err := stx.ExecContext(ctx, `UPDATE projection_versions SET serving = ?, building = ? WHERE name = ?`, next.Serving, building, name); err != nil {
		return fmt.Errorf("sqlite: catalog %s: %w", name, unavailable(ctx, err))
	}
	if err := stx.Commit(); err != nil {
		return fmt.Errorf("sqlite: catalog %s: commit: %w", name, unavailable(ctx, err))
	}
	return nil
}

// Forget removes group's offset in t, as [async.Log] describes; t
// holds the write lock, so no batch of the group is in flight.
func (l *Log) Forget(ctx context.Context, t uow.Tx, group string) error {
	st, err := asTx(t)
	if err != nil {
		return err // It names the backend and the foreign transaction.
	}
	if _, err := st.ExecContext(ctx, `DELETE FROM projection_offsets WHERE consumer_group = ?`, group); err != nil {
		return fmt.Errorf("sqlite: forget %s: %w", group, unavailable(ctx, err))
	}
	return nil
}

// Retire retires group's offset in t, as [async.Log] describes; t
// holds the write lock, so no batch of the group is in flight.
func (l *Log) Retire(ctx context.Context, t uow.Tx, group string) error {
	st, err := asTx(t)
	if err != nil {
		return err // It names the backend and the foreign transaction.
	}
	_, err = st.ExecContext(ctx, `
INSERT INTO projection_offsets (consumer_group, last_position, retired_at) VALUES (?1, 0, ?2)
ON CONFLICT (consumer_group) DO UPDATE SET retired_at = ?2`, group, micros(st.now))
	if err != nil {
		return fmt.Errorf("sqlite: retire %s: %w", group, unavailable(ctx, err))
	}
	return nil
}

// advanceOffset moves group's offset to position, never backwards.
func advanceOffset(group string, position int64) wsql.Query {
	return wsql.Query{
		Query: `INSERT INTO projection_offsets (consumer_group, last_position) VALUES (?, ?)
ON CONFLICT (consumer_group) DO UPDATE SET last_position = max(last_position, excluded.last_position),
	failed_at = NULL, failed_position = NULL, failed_error = NULL`,
		Args: []any{group, position},
	}
}

// logSubscriber is a watermill-sql subscriber that subscribes only to
// [async.Topic].
type logSubscriber struct{ *wsql.Subscriber }

func (s logSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if topic != async.Topic {
		return nil, fmt.Errorf("sqlite: log subscriber: topic %q, want %q", topic, async.Topic)
	}
	return s.Subscriber.Subscribe(ctx, topic)
}

// logSchema is the [wsql.SchemaAdapter] of a [Log]: it reads the events
// table, which the event store writes.
type logSchema struct {
	// group is the consumer group whose messages it makes, subscriber the
	// subscriber that reads them.
	group, subscriber string
	// types is a JSON array of the event types to deliver; empty: all.
	types     string
	batchSize int
	// batches is told of each event read ([async.Batches.Read]).
	batches *async.Batches
}

var _ wsql.SchemaAdapter = logSchema{}

// errPublish is returned by [logSchema.InsertQuery].
var errPublish = errors.New("sqlite: the event log is written by the event store, not published to")

func (logSchema) InsertQuery(string, message.Messages) (wsql.Query, error) {
	return wsql.Query{}, errPublish
}

// SelectQuery reads the next window of the log after the group's offset,
// up to a batch of events of every type in position order, and returns one
// row: the window's end, and its events of the group's types as a JSON
// array of [batchEvent] (empty when none is), so that the
// offset moves over the whole window whatever it holds: a projection of
// rare types does not read the same stretch of other events at every poll.
// A log with nothing after the offset gives no row.
func (s logSchema) SelectQuery(topic, group string, offsets wsql.OffsetsAdapter) wsql.Query {
	next := offsets.NextOffsetQuery(topic, group)
	args := slices.Clone(next.Args)
	wanted := ``
	if s.types != "" {
		wanted = ` WHERE type IN (SELECT value FROM json_each(?))`
		args = append(args, s.types)
	}
	q := `
WITH win AS (
	SELECT ` + eventColumns + ` FROM events WHERE position > (` + next.Query + `) ORDER BY position LIMIT ` + strconv.Itoa(s.batchSize) + `
)
SELECT max(position), (
	SELECT json_group_array(json_object(
		'p', position, 'i', id, 's', stream, 'v', version, 'y', type, 'd', json(data), 'm', json(metadata), 'r', recorded_at, 'n', schema_version
	) ORDER BY position)
	FROM win` + wanted + `
)
FROM win
HAVING count(*) > 0`
	return wsql.Query{Query: q, Args: args}
}

// UnmarshalMessage reads the row of [logSchema.SelectQuery] as the message
// of its batch.
func (s logSchema) UnmarshalMessage(row wsql.Scanner) (wsql.Row, error) {
	var end eventstore.Position
	var payload string
	if err := row.Scan(&end.Seq, &payload); err != nil {
		return wsql.Row{}, fmt.Errorf("sqlite: log: %w", err)
	}
	events, err := decodeBatch([]byte(payload))
	if err != nil {
		return wsql.Row{}, fmt.Errorf("sqlite: log: %w", err)
	}
	msg := async.BatchMessage(s.group, s.subscriber, end)
	s.batches.Read(s.subscriber, msg.UUID, events)
	return wsql.Row{Offset: end.Seq, UUID: []byte(msg.UUID), Payload: msg.Payload, Msg: msg}, nil
}

// SchemaInitializingQueries returns none: the migrations make the tables.
func (logSchema) SchemaInitializingQueries(string) []wsql.Query { return nil }

// SubscribeIsolationLevel is the default: the driver takes no other, and
// a SQLite transaction is serializable anyway. What matters is that the
// pool's transactions begin IMMEDIATE.
func (logSchema) SubscribeIsolationLevel() sql.IsolationLevel { return sql.LevelDefault }

// logOffsets is the [wsql.OffsetsAdapter] of a [Log], on the table
// projection_offsets.
type logOffsets struct{}

var _ wsql.OffsetsAdapter = logOffsets{}

func (logOffsets) NextOffsetQuery(_, group string) wsql.Query {
	return wsql.Query{
		Query: `SELECT last_position FROM projection_offsets WHERE consumer_group = ? AND retired_at IS NULL`,
		Args:  []any{group},
	}
}

// AckMessageQuery changes nothing: only [Log.Apply] moves the offset, with
// the writes of the events it covers, so that events acknowledged but held
// back for their batch are never passed over.
func (logOffsets) AckMessageQuery(string, wsql.Row, string) wsql.Query {
	return wsql.Query{Query: `SELECT 1`}
}

// ConsumedMessageQuery returns none: the write lock that the transaction
// holds keeps other subscribers of the group out already.
func (logOffsets) ConsumedMessageQuery(string, wsql.Row, string, []byte) wsql.Query {
	return wsql.Query{}
}

// BeforeSubscribingQueries puts the group's row at offset 0 unless it is
// there, so that SelectQuery finds an offset.
func (logOffsets) BeforeSubscribingQueries(_, group string) []wsql.Query {
	return []wsql.Query{{
		Query: `INSERT INTO projection_offsets (consumer_group, last_position) VALUES (?, 0) ON CONFLICT DO NOTHING`,
		Args:  []any{group},
	}}
}

// SchemaInitializingQueries returns none: the migrations make the tables.
func (logOffsets) SchemaInitializingQueries(string) []wsql.Query { return nil }

// batchEvent is one event of the JSON array of [logSchema.SelectQuery],
// with one-letter keys.
type batchEvent struct {
	Seq      int64           `json:"p"`
	ID       uuid.UUID       `json:"i"`
	Stream   string          `json:"s"`
	Version  int64           `json:"v"`
	Type     string          `json:"y"`
	Data     json.RawMessage `json:"d"`
	Metadata json.RawMessage `json:"m"`
	// RecordedAt is in microseconds since the epoch, as stored.
	RecordedAt int64 `json:"r"`
	// SchemaVersion is the version of Data's shape.
	SchemaVersion int `json:"n"`
}

// decodeBatch returns the events of a JSON array of batchEvent, in order.
func decodeBatch(payload []byte) ([]eventstore.Event, error) {
	var raw []batchEvent
	if err := json.Unmarshal(payload, &raw); err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	events := make([]eventstore.Event, len(raw))
	for i, r := range raw {
		e := eventstore.Event{ID: r.ID, Stream: r.Stream, Version: r.Version, Type: r.Type, Data: []byte(r.Data),
			SchemaVersion: r.SchemaVersion, RecordedAt: fromMicros(r.RecordedAt), Position: eventstore.Position{Seq: r.Seq}}
		if len(r.Metadata) > 0 && string(r.Metadata) != "{}" {
			if err := json.Unmarshal(r.Metadata, &e.Metadata); err != nil {
				return nil, fmt.Errorf("batch: event %s metadata: %w", r.ID, err)
			}
		}
		events[i] = e
	}
	return events, nil
}
