package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// EventStore is the [eventstore.Store] of this backend. Its zero value is
// ready to use: it keeps no state of its own and works in the transaction of
// the unit of work it is given.
type EventStore struct{}

var _ eventstore.Store = (*EventStore)(nil)

// eventColumns are the columns that scanEvent reads, in its order, of
// [fromEvents].
const eventColumns = `e.id, s.name, e.version, e.type, e.data, e.metadata, e.correlation_id, e.causation_id, e.recorded_at, e.transaction_id, e.position, e.schema_version`

// fromEvents is the events as e, each with its stream as s: the row of
// event_streams that names it. No foreign key holds events to their
// streams (migration 00021 says why): an event whose stream's row went
// would read with a NULL name, which fails the read, where a plain join
// would pass over the event.
const fromEvents = `events AS e LEFT JOIN event_streams AS s ON s.id = e.stream_id`

// A stream's name is kept once, in event_streams, and its events refer
// to it by its id (events.stream_id), which the primary key (stream_id,
// version) holds. An append finds its stream by name, and one that may
// start the stream adds it in the same statement when it is new:
// findStream, a condition, and makeStream are the CTEs found, made and
// stream, given the stream's name as $1. stream is the row of the
// stream's id: found's when the stream is stored, made's when this
// statement adds it, none when neither. made inserts only when found has
// none and the condition holds; ON CONFLICT DO NOTHING passes over a name
// that a concurrent transaction is adding: the insert waits for that one
// to end, and returns nothing when it committed, so the append inserts
// nothing and loses the race as it does to a concurrent append at its
// version, without an error. An append at a version above 0 cannot start
// a stream, and only finds it (foundStream): an INSERT in a statement
// costs it some microseconds to set up even when it inserts nothing.
const (
	findStream = `found AS (SELECT id FROM event_streams WHERE name = $1),
made AS (
	INSERT INTO event_streams (name) SELECT $1 WHERE NOT EXISTS (SELECT FROM found)`
	makeStream = `
	ON CONFLICT (name) DO NOTHING
	RETURNING id),
stream AS (SELECT id FROM found UNION ALL SELECT id FROM made)`
	foundStream = `stream AS (SELECT id FROM event_streams WHERE name = $1)`
	// streamID is the stream's id given its name as $1, NULL when it is
	// not stored.
	streamID = `(SELECT id FROM event_streams WHERE name = $1)`
	// headOf is the CTE of the stream's version, after stream's: 0 for a
	// stream with no events.
	headOf = `head AS (SELECT coalesce(max(version), 0) AS version FROM events WHERE stream_id = (SELECT id FROM stream))`
	// insertEvents is the INSERT of the events' columns but position and
	// transaction_id, which are their defaults.
	insertEvents = `INSERT INTO events (id, stream_id, version, recorded_at, schema_version, type, data, correlation_id, causation_id, metadata)`
)

// Append adds events to stream as [eventstore.Store.Append] describes.
//
// The common case is one statement that reads the stream's version, inserts
// every event only if that version is the expected one, and skips rows
// taken meanwhile (ON CONFLICT DO NOTHING), so that losing a race to a
// concurrent append returns an error instead of aborting the transaction.
// When not every event was inserted, it deletes the ones that were and
// reads what is stored to tell [eventstore.ErrConcurrency] from
// [eventstore.ErrDuplicateEvent], or from events already in the stream,
// which are returned as stored.
//
// An ID given twice in events is [eventstore.ErrDuplicateEvent]. Appending
// no events does nothing and returns nothing, whatever expected says.
func (s *EventStore) Append(ctx context.Context, t uow.Tx, stream string, expected eventstore.Expected, events ...eventstore.Event) ([]eventstore.Event, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
	}
	ids, err := eventstore.CheckAppend(stream, expected, events)
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
	}
	if len(events) == 0 {
		return nil, nil
	}

	now := t.Now()
	if len(events) == 1 {
		appended, err := s.appendOne(ctx, ptx, stream, expected, now, ids, events[0])
		if err == nil {
			wakeLogOnCommit(t)
		}
		return appended, err
	}
	c, err := columns(events)
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
	}
	q := appendQuery
	if expected > 0 {
		q = appendAtQuery
	}
	rows, err := ptx.Query(ctx, q, stream, int64(expected), now, ids, c.types, c.data, c.correlations, c.causations, c.metadata, c.schemas)
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
	}
	type inserted struct {
		ID      uuid.UUID
		Version int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[inserted])
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
	}
	if len(got) < len(events) {
		undo := make([]uuid.UUID, len(got))
		for i, g := range got {
			undo[i] = g.ID
		}
		return s.settleConflict(ctx, ptx, stream, expected, ids, undo)
	}
	first := got[0].Version
	for _, g := range got {
		first = min(first, g.Version)
	}
	appended := make([]eventstore.Event, len(events))
	for i, e := range events {
		e.SchemaVersion = eventstore.StoredSchemaVersion(e)
		e.Stream, e.Version, e.RecordedAt, e.Position = stream, first+int64(i), now, eventstore.Position{}
		appended[i] = e
	}
	wakeLogOnCommit(t)
	return appended, nil
}

// appendQuery and appendAtQuery are the statements of [EventStore.Append]
// for several events, under [eventstore.Any] or [eventstore.NoStream] and
// at a version above 0. The common case takes one statement: it reads the
// stream's version, inserts only if that is the expected one, and skips
// rows whose version or ID is taken. Anything short of every row inserted
// is sorted out by [EventStore.settleConflict], after undoing what was
// inserted. A new stream is added only when none of the events' IDs is
// stored, so that an append that fails leaves no stream behind.
const (
	appendQuery = `
WITH ` + findStream + ` AND NOT EXISTS (SELECT FROM events WHERE id = ANY($4::uuid[]))` + makeStream + appendSeveral
	appendAtQuery = `
WITH ` + foundStream + appendSeveral
	appendSeveral = `,
` + headOf + `
` + insertEvents + `
SELECT e.id, stream.id, head.version + e.n, $3, e.schema_version, e.type, e.data::jsonb, e.correlation_id, e.causation_id, e.metadata::jsonb
FROM stream, head, unnest($4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::smallint[])
	WITH ORDINALITY AS e(id, type, data, correlation_id, causation_id, metadata, schema_version, n)
WHERE $2::bigint < 0 OR head.version = $2
ORDER BY e.n
ON CONFLICT DO NOTHING
RETURNING id, version`
)

// AppendLater is [eventstore.Store.AppendLater]: under [eventstore.Any] it
// is [EventStore.Append], otherwise one INSERT held for the unit of work's
// next statement or its commit (sent at once in a read-only unit of work,
// which refuses it), whose errors [appendLaterError] reads.
func (s *EventStore) AppendLater(ctx context.Context, t uow.Tx, stream string, expected eventstore.Expected, events ...eventstore.Event) ([]eventstore.Event, error) {
	if expected == eventstore.Any {
		return s.Append(ctx, t, stream, expected, events...)
	}
	fail := func(err error) error {
		return fmt.Errorf("eventstore: append %s at version %d: %w", stream, expected, err)
	}
	held := heldAppend{expected: expected, one: appendLaterOneQuery, several: appendLaterQuery, cond: []any{int64(expected)}, fail: fail}
	if expected > 0 {
		held.one, held.several = appendLaterOneAtQuery, appendLaterAtQuery
	}
	appended, err := s.appendLater(ctx, t, stream, held, events)
	for i := range appended {
		appended[i].Version = int64(expected) + int64(i) + 1
	}
	return appended, err
}

// AppendLaterIf is [eventstore.Store.AppendLaterIf]: the INSERT of
// [EventStore.AppendLater], under cond instead of a version. It reads the
// stream's recent stretch from cond.Since ([stretchFrom]).
func (s *EventStore) AppendLaterIf(ctx context.Context, t uow.Tx, stream string, cond eventstore.Condition, events ...eventstore.Event) ([]eventstore.Event, error) {
	fail := func(err error) error {
		return fmt.Errorf("eventstore: append %s if fewer than %d since %s: %w",
			stream, cond.Fewer, cond.Since.UTC().Format(time.RFC3339Nano), err)
	}
	if err := eventstore.CheckCondition(cond); err != nil {
		return nil, fail(err)
	}
	var counted []string // NULL counts every event.
	if len(cond.Counted) > 0 {
		counted = cond.Counted
	}
	return s.appendLater(ctx, t, stream, heldAppend{
		expected: eventstore.Any, one: appendIfOneQuery, several: appendIfQuery,
		cond: []any{ceilMicro(cond.Since), cond.Fewer, counted, cond.Absent}, fail: fail,
	}, events)
}

// heldAppend is how [EventStore.appendLater] holds an append.
type heldAppend struct {
	// expected is the expectation the events are validated with
	// ([eventstore.CheckAppend]); the statement itself checks its
	// condition.
	expected eventstore.Expected
	// one and several are the INSERT of one event and of more, whose
	// condition takes cond as $10 on.
	one, several string
	cond         []any
	// fail describes an error of the append.
	fail func(error) error
}

// appendLater holds the INSERT of events as a says, and returns the events
// with their stream and time set.
func (s *EventStore) appendLater(ctx context.Context, t uow.Tx, stream string, a heldAppend, events []eventstore.Event) ([]eventstore.Event, error) {
	fail := a.fail
	pt, err := asTx(t)
	if err != nil {
		return nil, fail(err)
	}
	ids, err := eventstore.CheckAppend(stream, a.expected, events)
	if err != nil {
		return nil, fail(err)
	}
	if len(events) == 0 {
		return nil, nil
	}
	c, err := columns(events)
	if err != nil {
		return nil, fail(err)
	}
	now := t.Now()
	var args []any
	q := a.one
	if len(events) == 1 {
		args = []any{stream, now, pgtype.UUID{Bytes: events[0].ID, Valid: true}, c.types[0], c.data[0], c.correlations[0], c.causations[0], c.metadata[0], c.schemas[0]}
	} else {
		q, args = a.several, []any{stream, now, ids, c.types, c.data, c.correlations, c.causations, c.metadata, c.schemas}
	}
	args = append(args, a.cond...)
	if err := pt.later(ctx, q, args, func(err error) error { return fail(appendLaterError(err)) }); err != nil {
		return nil, err
	}
	appended := make([]eventstore.Event, len(events))
	for i, e := range events {
		e.SchemaVersion = eventstore.StoredSchemaVersion(e)
		e.Stream, e.Version, e.RecordedAt, e.Position = stream, 0, now, eventstore.Position{}
		appended[i] = e
	}
	pt.wakeLog()
	return appended, nil
}

// The statements of [EventStore.AppendLater] and [EventStore.AppendLaterIf],
// for several events and for one. They insert the events after the
// stream's head when the condition on $10 on holds (the head is the
// expected version, or the stream's recent events meet the
// [eventstore.Condition]), or when an event's ID is stored already, so
// that the ID's unique index refuses the row (ErrDuplicateEvent). A
// version that another transaction inserts meanwhile is skipped once that
// one commits (the INSERT waits for it), and so is a new stream's name
// (see [findStream]). When fewer events went in than were given, the
// statement inserts a row of NULLs, which the table refuses: a failed
// statement is the one way to fail the unit of work whose COMMIT is
// already on its way in the same pipeline, and this failure's error names
// no stream, version or data, where a NULL version or a broken primary
// key would put the stream's name and the event in PostgreSQL's log
// ([eventstore.Store.AppendLater]). Where the condition holds and nothing
// races, nothing fails and PostgreSQL logs nothing. An append that may
// start a stream (at [eventstore.NoStream], or under a condition) adds it
// when it is new, whatever the condition: when the events do not all go
// in, the refusal fails the unit of work, and takes the stream's row with
// it. One at a version above 0 ([appendLaterOneAtQuery]) only finds the
// stream: when it is not stored, nothing goes in, and the append is
// refused, with an ID stored already or not.
//
// The condition and the ID's probe are uncorrelated subqueries, so
// InitPlans, which PostgreSQL runs once, and the probe only when the
// condition fails; correlated with each row they would run for every
// event. A truncation that deletes a probed ID between the probe and the
// insert would let the events in at the head; only a replay of an event
// being truncated meets that.
const (
	// The conditions on $10 on: a version, or since, fewer, counted
	// types (NULL: all) and absent types.
	atExpected = `head.version = $10`
	fewerSince = `(SELECT count(*) FILTER (WHERE $12::text[] IS NULL OR type = ANY($12::text[])) < $11
		AND count(*) FILTER (WHERE type = ANY($13::text[])) = 0
		FROM events WHERE stream_id = (SELECT id FROM stream) AND version > ` + stretchFrom + `$10` + stretchTo + `$10` + stretchEnd + `)`

	appendHead = `
WITH ` + findStream + makeStream
	appendHeadAt = `
WITH ` + foundStream
	appendBody = `,
` + headOf + `,
appended AS (
	` + insertEvents + `
	SELECT `
	appendOneBefore = appendBody + `$3::uuid, stream.id, head.version + 1, $2, $9::smallint, $4::text, $5::text::jsonb, $6::text, $7::text, $8::text::jsonb
	FROM stream, head
	WHERE `
	appendOneAfter = ` OR EXISTS (SELECT 1 FROM events WHERE id = $3::uuid)
	ON CONFLICT (stream_id, version) DO NOTHING
	RETURNING 1)
` + refuseOne
	appendSeveralBefore = appendBody + `e.id, stream.id, head.version + e.n, $2, e.schema_version, e.type, e.data::jsonb, e.correlation_id, e.causation_id, e.metadata::jsonb
	FROM stream, head, unnest($3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::smallint[])
		WITH ORDINALITY AS e(id, type, data, correlation_id, causation_id, metadata, schema_version, n)
	WHERE `
	appendSeveralAfter = ` OR EXISTS (SELECT 1 FROM events WHERE id = ANY($3::uuid[]))
	ORDER BY e.n
	ON CONFLICT (stream_id, version) DO NOTHING
	RETURNING 1)
` + refuseSeveral
	// The refusal, whose comment PostgreSQL logs with the error.
	refuseOne     = `INSERT INTO events (id) SELECT NULL WHERE NOT EXISTS (SELECT FROM appended) -- eventstore: append refused`
	refuseSeveral = `INSERT INTO events (id) SELECT NULL WHERE (SELECT count(*) FROM appended) < cardinality($3::uuid[]) -- eventstore: append refused`

	appendLaterOneQuery   = appendHead + appendOneBefore + atExpected + appendOneAfter
	appendLaterQuery      = appendHead + appendSeveralBefore + atExpected + appendSeveralAfter
	appendLaterOneAtQuery = appendHeadAt + appendOneBefore + atExpected + appendOneAfter
	appendLaterAtQuery    = appendHeadAt + appendSeveralBefore + atExpected + appendSeveralAfter
	appendIfOneQuery      = appendHead + appendOneBefore + fewerSince + appendOneAfter
	appendIfQuery         = appendHead + appendSeveralBefore + fewerSince + appendSeveralAfter
)

// appendLaterError returns err, the error of an [EventStore.AppendLater]
// statement, wrapped with the error of [eventstore.Store] it means, or as
// it is.
func appendLaterError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.TableName != "events" {
		return err
	}
	switch {
	case pgErr.Code == notNullViolation && pgErr.ColumnName == "id":
		return fmt.Errorf("%w: %w", eventstore.ErrConcurrency, err)
	case pgErr.Code == uniqueViolation && pgErr.ConstraintName == "events_id_key":
		return fmt.Errorf("%w: %w", eventstore.ErrDuplicateEvent, err)
	}
	return err
}

// eventValues are the columns of events that an append writes, but the
// stream and version, one slice each, in the order of the events, as the
// arrays of a multi-row INSERT take them.
type eventValues struct {
	types, data, correlations, causations []string
	// metadata is the JSON of the metadata but its correlation and
	// causation, which have columns of their own.
	metadata []string
	schemas  []int16
}

// columns returns the columns of events.
func columns(events []eventstore.Event) (eventValues, error) {
	n := len(events)
	c := eventValues{
		types: make([]string, n), data: make([]string, n), correlations: make([]string, n),
		causations: make([]string, n), metadata: make([]string, n), schemas: make([]int16, n),
	}
	for i, e := range events {
		md, err := encodeMetadata(e.Metadata)
		if err != nil {
			return eventValues{}, fmt.Errorf("encode metadata of %s: %w", e.ID, err)
		}
		c.types[i], c.data[i], c.schemas[i] = e.Type, string(e.Data), int16(eventstore.StoredSchemaVersion(e))
		c.correlations[i], c.causations[i], c.metadata[i] = e.Metadata.CorrelationID, e.Metadata.CausationID, md
	}
	return c, nil
}

// encodeMetadata returns the JSON of md but its correlation and causation,
// which events keep in columns of their own: {} when that leaves nothing.
func encodeMetadata(md eventstore.Metadata) (string, error) {
	md.CorrelationID, md.CausationID = "", ""
	if len(md.Extra) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(md)
	return string(b), err
}

// appendOneQuery and appendOneAtQuery are the statements of
// [EventStore.Append] for one event, whose values travel as scalars: pgx
// encodes those without the reflection that arrays of UUIDs cost it. They
// are [appendQuery] and [appendAtQuery] otherwise.
const (
	appendOneQuery = `
WITH ` + findStream + ` AND NOT EXISTS (SELECT FROM events WHERE id = $4::uuid)` + makeStream + appendOne
	appendOneAtQuery = `
WITH ` + foundStream + appendOne
	appendOne = `,
` + headOf + `
` + insertEvents + `
SELECT $4::uuid, stream.id, head.version + 1, $3, $10::smallint, $5::text, $6::text::jsonb, $7::text, $8::text, $9::text::jsonb
FROM stream, head
WHERE $2::bigint < 0 OR head.version = $2
ON CONFLICT DO NOTHING
RETURNING version`
)

// appendOne is [EventStore.Append] of the one event e, whose ID is ids[0].
func (s *EventStore) appendOne(ctx context.Context, ptx Querier, stream string, expected eventstore.Expected, now time.Time, ids []uuid.UUID, e eventstore.Event) ([]eventstore.Event, error) {
	md, err := encodeMetadata(e.Metadata)
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: encode metadata of %s: %w", stream, e.ID, err)
	}
	q := appendOneQuery
	if expected > 0 {
		q = appendOneAtQuery
	}
	var version int64
	err = ptx.QueryRow(ctx, q, stream, int64(expected), now,
		pgtype.UUID{Bytes: e.ID, Valid: true}, e.Type, string(e.Data), e.Metadata.CorrelationID, e.Metadata.CausationID, md,
		int16(eventstore.StoredSchemaVersion(e))).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.settleConflict(ctx, ptx, stream, expected, ids, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
	}
	e.SchemaVersion = eventstore.StoredSchemaVersion(e)
	e.Stream, e.Version, e.RecordedAt, e.Position = stream, version, now, eventstore.Position{}
	return []eventstore.Event{e}, nil
}

// appendState is what [EventStore.Append] needs to know before it writes.
type appendState struct {
	// version is the stream's current version, 0 when it has no events.
	version int64
	// found counts the appended IDs stored in any stream; inStream those
	// stored in this stream.
	found, inStream int
}

func readAppendState(ctx context.Context, ptx Querier, stream string, ids []uuid.UUID) (appendState, error) {
	const q = `
SELECT (SELECT coalesce(max(version), 0) FROM events WHERE stream_id = ` + streamID + `),
	count(*), count(*) FILTER (WHERE stream_id = ` + streamID + `)
FROM events WHERE id = ANY($2)`
	var st appendState
	err := ptx.QueryRow(ctx, q, stream, ids).Scan(&st.version, &st.found, &st.inStream)
	return st, err
}

// settleDuplicates handles an append some of whose IDs are stored already:
// when all of them are in stream it returns the stored events, otherwise
// [eventstore.ErrDuplicateEvent].
func (s *EventStore) settleDuplicates(ctx context.Context, ptx Querier, stream string, ids []uuid.UUID, st appendState) ([]eventstore.Event, error) {
	if st.inStream < len(ids) {
		return nil, fmt.Errorf("eventstore: append %s: %w: %d of %d events stored, %d of them in this stream",
			stream, eventstore.ErrDuplicateEvent, st.found, len(ids), st.inStream)
	}
	rows, err := ptx.Query(ctx, `SELECT `+eventColumns+` FROM `+fromEvents+` WHERE e.id = ANY($1) ORDER BY e.version`, ids)
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
	}
	stored, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
	}
	for i := range stored {
		stored[i].Position = eventstore.Position{}
	}
	return stored, nil
}

// settleConflict handles an append that did not insert every event: the
// stream was not at the expected version, or a concurrent transaction
// committed the same (stream, version) or event ID first, or some events
// were stored already. It deletes the rows the insert did write, so that the
// append leaves nothing behind, and then decides from what is stored:
// events all stored in this stream are returned as they are (idempotency),
// events stored elsewhere are [eventstore.ErrDuplicateEvent], and the rest
// is [eventstore.ErrConcurrency].
func (s *EventStore) settleConflict(ctx context.Context, ptx Querier, stream string, expected eventstore.Expected, ids, inserted []uuid.UUID) ([]eventstore.Event, error) {
	if len(inserted) > 0 {
		if _, err := ptx.Exec(ctx, `DELETE FROM events WHERE id = ANY($1)`, inserted); err != nil {
			return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
		}
	}
	st, err := readAppendState(ctx, ptx, stream, ids)
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
	}
	if st.found > 0 {
		return s.settleDuplicates(ctx, ptx, stream, ids, st)
	}
	if expected != eventstore.Any && int64(expected) != st.version {
		return nil, fmt.Errorf("eventstore: append %s: %w: stream is at version %d, expected %d",
			stream, eventstore.ErrConcurrency, st.version, expected)
	}
	return nil, fmt.Errorf("eventstore: append %s: %w: a concurrent transaction appended first, stream is at version %d",
		stream, eventstore.ErrConcurrency, st.version)
}

// Load returns the events of stream from version from on, in version order,
// with their Position set. It reads in a unit of work of this backend's
// runner, or in the transaction of an event-log subscriber ([SQLTx]),
// where an asynchronous projection folds the stream of an event it was
// handed.
func (s *EventStore) Load(ctx context.Context, t uow.Tx, stream string, from int64) ([]eventstore.Event, error) {
	if st, ok := t.(*sqlTx); ok && st != nil {
		events, err := loadSQL(ctx, st.Tx, stream, from)
		if err != nil {
			return nil, fmt.Errorf("eventstore: load %s: %w", stream, unavailable(ctx, err))
		}
		return events, nil
	}
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("eventstore: load %s: %w", stream, err)
	}
	rows, err := ptx.Query(ctx,
		`SELECT `+eventColumns+` FROM `+fromEvents+` WHERE s.name = $1 AND e.version >= $2 ORDER BY e.version`,
		stream, from)
	if err != nil {
		return nil, fmt.Errorf("eventstore: load %s: %w", stream, err)
	}
	events, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("eventstore: load %s: %w", stream, err)
	}
	return events, nil
}

// loadSQL is [EventStore.Load] in tx, a database/sql transaction, which
// scans the columns pgx reads into Go types itself as text.
func loadSQL(ctx context.Context, tx *sql.Tx, stream string, from int64) ([]eventstore.Event, error) {
	rows, err := tx.QueryContext(ctx, `SELECT e.id, s.name, e.version, e.type, e.data::text, e.metadata::text, e.correlation_id, e.causation_id,
	e.recorded_at, e.transaction_id::text, e.position, e.schema_version
FROM `+fromEvents+` WHERE s.name = $1 AND e.version >= $2 ORDER BY e.version`, stream, from)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var events []eventstore.Event
	for rows.Next() {
		var e eventstore.Event
		var data, metadata, correlation, causation, txid string
		err := rows.Scan(&e.ID, &e.Stream, &e.Version, &e.Type, &data, &metadata, &correlation, &causation,
			&e.RecordedAt, &txid, &e.Position.Seq, &e.SchemaVersion)
		if err != nil {
			return nil, err
		}
		e.Data, e.RecordedAt = []byte(data), e.RecordedAt.UTC()
		if e.Position.Commit, err = strconv.ParseUint(txid, 10, 64); err != nil {
			return nil, fmt.Errorf("transaction id %q: %w", txid, err)
		}
		if metadata != "{}" {
			if err := json.Unmarshal([]byte(metadata), &e.Metadata); err != nil {
				return nil, fmt.Errorf("event %s metadata: %w", e.ID, err)
			}
		}
		e.Metadata.CorrelationID, e.Metadata.CausationID = correlation, causation
		events = append(events, e)
	}
	return events, rows.Err()
}

// LoadSince returns the events of stream recorded at or after since, in
// version order, with their Position set, and the stream's current version,
// as [eventstore.Store.LoadSince] describes.
//
// It is one statement, so one snapshot: the head version and the recent
// stretch both come from the primary key (stream_id, version), read from
// the head back ([stretchFrom]), and neither reads the stream's older
// events.
// Every row carries the head; a stream with no recent event returns one row
// of the head alone, whose event columns are NULL.
func (s *EventStore) LoadSince(ctx context.Context, t uow.Tx, stream string, since time.Time) ([]eventstore.Event, int64, error) {
	when := since.UTC().Format(time.RFC3339Nano)
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, 0, fmt.Errorf("eventstore: load %s since %s: %w", stream, when, err)
	}
	rows, err := ptx.Query(ctx, loadSinceQuery, stream, ceilMicro(since))
	if err != nil {
		return nil, 0, fmt.Errorf("eventstore: load %s since %s: %w", stream, when, err)
	}
	tail, err := pgx.CollectRows(rows, scanTail)
	if err != nil {
		return nil, 0, fmt.Errorf("eventstore: load %s since %s: %w", stream, when, err)
	}
	var head int64
	events := make([]eventstore.Event, 0, len(tail))
	for _, r := range tail {
		head = r.head
		if r.event != nil {
			events = append(events, *r.event)
		}
	}
	return events, head, nil
}

// loadSinceQuery is the statement of [EventStore.LoadSince], given the
// stream and since: the head, then [eventColumns] of each recent event.
const loadSinceQuery = `
WITH stream AS (SELECT id, name FROM event_streams WHERE name = $1),
` + headOf + `
SELECT head.version, ` + eventColumns + `
FROM head LEFT JOIN (events AS e JOIN stream AS s ON s.id = e.stream_id)
	ON e.stream_id = (SELECT id FROM stream) AND e.version > ` + stretchFrom + `$2` + stretchTo + `$2` + stretchEnd + `
ORDER BY e.version`

// stretchFrom, a time, stretchTo, the time again, and stretchEnd make the
// version after which the recent stretch of the stream (the CTE stream's,
// whose head is the CTE head's) begins from that time: the version of its
// last event recorded before the time, or 0. It walks the stream back from
// its head one version at a time, each step a probe of the primary key
// (stream_id, version) made as a scalar subquery, which no estimate can
// turn into anything else, and stops at the first such event or where the
// versions end (a version below the first kept has no time): it reads
// the recent events and one more, however long the stream. The plainer
// ORDER BY version DESC LIMIT 1, and a walk that joins events, let the
// planner read the whole stream where its statistics made the stream
// short: a generic plan read all 100,000 events of a long one (14 and
// 31 ms) to find one. A stream's versions have no gap but before its
// first event kept ([eventstore.Store.Truncate]).
const (
	stretchFrom = `coalesce((WITH RECURSIVE back (version, recorded_at) AS (
	SELECT version, recorded_at FROM events WHERE stream_id = (SELECT id FROM stream) AND version = (SELECT version FROM head)
	UNION ALL
	SELECT back.version - 1, (SELECT e.recorded_at FROM events AS e WHERE e.stream_id = (SELECT id FROM stream) AND e.version = back.version - 1)
	FROM back WHERE back.recorded_at >= `
	stretchTo = `
) SELECT version FROM back WHERE recorded_at < `
	stretchEnd = `), 0)`
)

// ceilMicro returns t rounded up to the microsecond, the precision of
// timestamptz. pgx would round it down, and an event recorded at the start
// of that microsecond, before t, would pass for one recorded at or after t.
func ceilMicro(t time.Time) time.Time {
	if c := t.Truncate(time.Microsecond); !c.Equal(t) {
		return c.Add(time.Microsecond)
	}
	return t
}

// ReadAll returns up to limit events after position in the order of their
// transactions' IDs, as watermill-sql orders its PostgreSQL messages: two
// overlapping transactions may commit in the other order, but a reader never
// sees the later ID before the earlier one has ended. A Position's Commit is the
// id (xid8) of the transaction that appended the event, on the log's clock
// (the id plus a shift that stays 0 until the database is copied into a
// cluster whose ids run lower: see [DB.Migrate]), and its Seq the event's
// row number. Only events of transactions older than every
// transaction still in flight (pg_snapshot_xmin, on the log's clock, which
// [DB.Migrate] keeps ahead of the log) are returned, so an event
// is never returned before one that may still commit ahead of it. That
// horizon is the server's: any long transaction, even on another schema,
// delays what ReadAll returns.
func (s *EventStore) ReadAll(ctx context.Context, t uow.Tx, after eventstore.Position, limit int) ([]eventstore.Event, error) {
	return s.read(ctx, t, after, limit, "read all",
		`AND e.transaction_id < `+logHorizon)
}

// ReadCommitted returns up to limit events after position in the order of
// [EventStore.ReadAll], of every transaction committed when it runs,
// without the horizon of transactions in flight.
func (s *EventStore) ReadCommitted(ctx context.Context, t uow.Tx, after eventstore.Position, limit int) ([]eventstore.Event, error) {
	return s.read(ctx, t, after, limit, "read committed", "")
}

// Lock holds stream for t until t ends, with a transaction-level advisory
// lock on a 64-bit hash of the stream's name. Two streams whose names share
// a hash only wait for each other a little more than they must. In a
// read-only unit of work it returns an error wrapping [uow.ErrReadOnly], as
// [eventstore.Store.Lock] says, though PostgreSQL would take the lock: only
// writers queue.
func (s *EventStore) Lock(ctx context.Context, t uow.Tx, stream string) error {
	ptx, err := PgxTx(t)
	if _, ok := ptx.(readOnlyTx); ok {
		err = fmt.Errorf("%s: %w", pkg, uow.ErrReadOnly)
	}
	if err != nil {
		return fmt.Errorf("eventstore: lock %s: %w", stream, err)
	}
	if _, err := ptx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockID("stream."+stream)); err != nil {
		return fmt.Errorf("eventstore: lock %s: %w", stream, err)
	}
	return nil
}

// Truncate deletes the events of stream below version before, but never
// its last, as [eventstore.Store] describes.
func (s *EventStore) Truncate(ctx context.Context, t uow.Tx, stream string, before int64) (int64, error) {
	ptx, err := PgxTx(t)
	if _, ok := ptx.(readOnlyTx); ok {
		err = fmt.Errorf("%s: %w", pkg, uow.ErrReadOnly)
	}
	if err != nil {
		return 0, fmt.Errorf("eventstore: truncate %s: %w", stream, err)
	}
	tag, err := ptx.Exec(ctx, `
WITH stream AS (SELECT id FROM event_streams WHERE name = $1)
DELETE FROM events WHERE stream_id = (SELECT id FROM stream) AND version < $2
AND version < (SELECT max(version) FROM events WHERE stream_id = (SELECT id FROM stream))`, stream, before)
	if err != nil {
		return 0, fmt.Errorf("eventstore: truncate %s: %w", stream, err)
	}
	return tag.RowsAffected(), nil
}

func (s *EventStore) read(ctx context.Context, t uow.Tx, after eventstore.Position, limit int, op, horizon string) ([]eventstore.Event, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("eventstore: %s: %w", op, err)
	}
	if limit < 1 {
		return nil, fmt.Errorf("eventstore: %s: limit must be at least 1, got %d", op, limit)
	}
	q := `
SELECT ` + eventColumns + ` FROM ` + fromEvents + `
WHERE (e.transaction_id, e.position) > ($1::xid8, $2) ` + horizon + `
ORDER BY e.transaction_id, e.position
LIMIT $3`
	rows, err := ptx.Query(ctx, q, after.Commit, after.Seq, limit)
	if err != nil {
		return nil, fmt.Errorf("eventstore: %s: %w", op, err)
	}
	events, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("eventstore: %s: %w", op, err)
	}
	return events, nil
}

// scanEvent reads a row of [eventColumns].
func scanEvent(row pgx.CollectableRow) (eventstore.Event, error) {
	var e eventstore.Event
	var recorded time.Time
	err := row.Scan(eventDest(&e, &recorded)...)
	e.RecordedAt = recorded.UTC()
	return e, err
}

// eventDest returns where the columns of [eventColumns] are scanned into e,
// with recorded_at into recorded, which the caller turns to UTC.
func eventDest(e *eventstore.Event, recorded *time.Time) []any {
	return []any{&e.ID, &e.Stream, &e.Version, &e.Type, &e.Data, &e.Metadata,
		&e.Metadata.CorrelationID, &e.Metadata.CausationID, recorded,
		&e.Position.Commit, &e.Position.Seq, &e.SchemaVersion}
}

// tailRow is a row of [EventStore.LoadSince]: the stream's head version and
// a recent event, nil when the stream has none.
type tailRow struct {
	head  int64
	event *eventstore.Event
}

// scanTail reads a row of [EventStore.LoadSince]: the head, then
// [eventColumns], all NULL when no event is recent.
func scanTail(row pgx.CollectableRow) (tailRow, error) {
	var r tailRow
	var e eventstore.Event
	var recorded time.Time
	dest := append([]any{&r.head}, eventDest(&e, &recorded)...)
	if row.RawValues()[1] == nil {
		// The id of an event is never NULL: no event is recent, and the
		// row holds only the head. pgx skips a nil destination.
		clear(dest[1:])
		return r, row.Scan(dest...)
	}
	if err := row.Scan(dest...); err != nil {
		return r, err
	}
	e.RecordedAt = recorded.UTC()
	r.event = &e
	return r, nil
}

// wakeLogOnCommit makes the commit of t, a unit of work that appended
// events, wake the subscribers of the event log in this process.
func wakeLogOnCommit(t uow.Tx) {
	if pt, err := asTx(t); err == nil {
		pt.wakeLog()
	}
}
