package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// EventStore is the [eventstore.Store] of this backend. Its zero value is
// ready to use: it keeps no state of its own and works in the transaction of
// the unit of work it is given.
//
// A unit of work holds SQLite's write lock from its first statement to its
// end, so no other transaction can write while an append decides: an
// append reads the stream's version and the IDs already stored, decides,
// and inserts, with nothing to race against. For the same reason an
// event's position, assigned when it is inserted, is its place in commit
// order.
type EventStore struct{}

var _ eventstore.Store = (*EventStore)(nil)

// eventColumns are the columns that scanEvent reads, in its order.
const eventColumns = `id, stream, version, type, data, metadata, recorded_at, position, schema_version`

// appendChunk is how many events one INSERT statement of Append takes, well
// below SQLite's limit of 32766 parameters.
const appendChunk = 500

// Append adds events to stream as [eventstore.Store.Append] describes.
//
// It reads the stream's version and which of the events are stored
// already, then returns the stored events when all of them are in this
// stream, [eventstore.ErrDuplicateEvent] when some are stored (here or
// elsewhere), [eventstore.ErrConcurrency] when the stream is not at
// expected, and otherwise inserts the events numbered from the stream's
// version. An ID given twice in events is ErrDuplicateEvent. Data that
// SQLite's JSON functions refuse, such as JSON nested deeper than 1000
// levels, is [eventstore.ErrInvalidEvent]. A failed append writes nothing.
func (s *EventStore) Append(ctx context.Context, t uow.Tx, stream string, expected eventstore.Expected, events ...eventstore.Event) ([]eventstore.Event, error) {
	appended, err := s.append(ctx, t, stream, expected, nil, events)
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s: %w", stream, err)
	}
	return appended, nil
}

// append is [EventStore.Append] without its errors' prefix, or, when cond
// is not nil, [EventStore.AppendLaterIf]: refused in a read-only unit of
// work, ErrDuplicateEvent for any event stored already, even all in this
// stream, and ErrConcurrency when the stream's recent events do not meet
// cond; the events follow the head.
func (s *EventStore) append(ctx context.Context, t uow.Tx, stream string, expected eventstore.Expected, cond *eventstore.Condition, events []eventstore.Event) ([]eventstore.Event, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, err
	}
	ids, err := eventstore.CheckAppend(stream, expected, events)
	if err != nil {
		return nil, err
	}
	if cond != nil {
		if err := eventstore.CheckCondition(*cond); err != nil {
			return nil, err
		}
	}
	if len(events) == 0 {
		return nil, nil
	}
	if cond != nil {
		if err := st.writing(); err != nil {
			return nil, err
		}
	}
	idList, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}

	const state = `
SELECT (SELECT coalesce(max(version), 0) FROM events WHERE stream = ?1),
	count(*), coalesce(sum(stream = ?1), 0)
FROM events WHERE id IN (SELECT value FROM json_each(?2))`
	var version int64
	var found, inStream int
	if err := st.QueryRowContext(ctx, state, stream, string(idList)).Scan(&version, &found, &inStream); err != nil {
		return nil, err
	}
	if found > 0 {
		if inStream < len(ids) || cond != nil {
			return nil, fmt.Errorf("%w: %d of %d events stored, %d of them in this stream",
				eventstore.ErrDuplicateEvent, found, len(ids), inStream)
		}
		return s.stored(ctx, st, string(idList))
	}
	if cond != nil {
		if err := s.checkCondition(ctx, st, stream, *cond); err != nil {
			return nil, err
		}
	} else if expected != eventstore.Any && int64(expected) != version {
		return nil, fmt.Errorf("%w: stream is at version %d, expected %d",
			eventstore.ErrConcurrency, version, expected)
	}

	now := t.Now()
	appended := make([]eventstore.Event, len(events))
	args := make([]any, 0, 8*min(len(events), appendChunk))
	err = st.atomically(ctx, len(events) > appendChunk, func() error {
		for first := 0; first < len(events); first += appendChunk {
			chunk := events[first:min(first+appendChunk, len(events))]
			args = args[:0]
			for i, e := range chunk {
				md, err := json.Marshal(e.Metadata)
				if err != nil {
					return fmt.Errorf("encode metadata of %s: %w", e.ID, err)
				}
				e.Stream, e.Version, e.RecordedAt, e.Position = stream, version+int64(first+i+1), now, eventstore.Position{}
				e.SchemaVersion = eventstore.StoredSchemaVersion(e)
				appended[first+i] = e
				args = append(args, e.ID, stream, e.Version, e.Type, string(e.Data), string(md), micros(now), e.SchemaVersion)
			}
			q := `INSERT INTO events (id, stream, version, type, data, metadata, recorded_at, schema_version) VALUES ` +
				valueRows(len(chunk), 8)
			if _, err := st.ExecContext(ctx, q, args...); err != nil {
				if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_CHECK) {
					return fmt.Errorf("%w: data or metadata that SQLite does not take for JSON: %w", eventstore.ErrInvalidEvent, err)
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	st.wakeLog()
	return appended, nil
}

// AppendLater is [EventStore.Append]: SQLite has no round trip to save.
func (s *EventStore) AppendLater(ctx context.Context, t uow.Tx, stream string, expected eventstore.Expected, events ...eventstore.Event) ([]eventstore.Event, error) {
	return s.Append(ctx, t, stream, expected, events...)
}

// AppendLaterIf appends events at the stream's head when its recent
// events meet cond, as [eventstore.Store.AppendLaterIf] describes. A unit
// of work holds the write lock from its first statement, so nothing
// appends between the check and the append.
func (s *EventStore) AppendLaterIf(ctx context.Context, t uow.Tx, stream string, cond eventstore.Condition, events ...eventstore.Event) ([]eventstore.Event, error) {
	appended, err := s.append(ctx, t, stream, eventstore.Any, &cond, events)
	if err != nil {
		return nil, fmt.Errorf("eventstore: append %s if fewer than %d since %s: %w",
			stream, cond.Fewer, cond.Since.UTC().Format(time.RFC3339Nano), err)
	}
	for i := range appended {
		appended[i].Version = 0
	}
	return appended, nil
}

// checkCondition returns ErrConcurrency when the recent stretch of
// stream, from cond.Since ([stretchStart]), does not meet cond. It names
// the types in the statement:
// a list to unpack (json_each) would cost a stream with recent events
// more than one without, which a caller that hides how busy a stream is
// must not pay.
func (s *EventStore) checkCondition(ctx context.Context, st *tx, stream string, cond eventstore.Condition) error {
	counted, absent := "count(*)", "0"
	args := make([]any, 0, len(cond.Counted)+len(cond.Absent)+2)
	if len(cond.Counted) > 0 {
		counted = "coalesce(sum(type IN (" + placeholders(len(cond.Counted)) + ")), 0)"
		for _, typ := range cond.Counted {
			args = append(args, typ)
		}
	}
	if len(cond.Absent) > 0 {
		absent = "coalesce(sum(type IN (" + placeholders(len(cond.Absent)) + ")), 0)"
		for _, typ := range cond.Absent {
			args = append(args, typ)
		}
	}
	args = append(args, stream, stream, ceilMicros(cond.Since))
	q := `SELECT ` + counted + `, ` + absent + ` FROM events WHERE stream = ? AND version > ` + stretchStart
	var n, absentN int
	if err := st.QueryRowContext(ctx, q, args...).Scan(&n, &absentN); err != nil {
		return err
	}
	switch {
	case n >= cond.Fewer:
		return fmt.Errorf("%w: %d events counted since", eventstore.ErrConcurrency, n)
	case absentN > 0:
		return fmt.Errorf("%w: %d events of an absent type since", eventstore.ErrConcurrency, absentN)
	}
	return nil
}

// stored returns the events with the IDs of the JSON array idList, all of
// which are in stream, as an idempotent append returns them.
func (s *EventStore) stored(ctx context.Context, st *tx, idList string) ([]eventstore.Event, error) {
	events, err := queryEvents(ctx, st,
		`SELECT `+eventColumns+` FROM events WHERE id IN (SELECT value FROM json_each(?)) ORDER BY version`, idList)
	if err != nil {
		return nil, err
	}
	for i := range events {
		events[i].Position = eventstore.Position{}
	}
	return events, nil
}

// Load returns the events of stream from version from on, in version order,
// with their Position set.
func (s *EventStore) Load(ctx context.Context, t uow.Tx, stream string, from int64) ([]eventstore.Event, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, fmt.Errorf("eventstore: load %s: %w", stream, err)
	}
	events, err := queryEvents(ctx, st,
		`SELECT `+eventColumns+` FROM events WHERE stream = ? AND version >= ? ORDER BY version`, stream, from)
	if err != nil {
		return nil, fmt.Errorf("eventstore: load %s: %w", stream, err)
	}
	return events, nil
}

// LoadSince returns the recent stretch of stream from since, in version
// order, with their Position set, and the stream's current version, as
// [eventstore.Store.LoadSince] describes. Both come from the index of
// UNIQUE (stream, version), read from the head back ([stretchStart]),
// and neither reads the stream's older events. The two queries see one
// state of the stream: a unit of work holds the write lock from its
// first statement, and a read-only one reads one snapshot.
func (s *EventStore) LoadSince(ctx context.Context, t uow.Tx, stream string, since time.Time) ([]eventstore.Event, int64, error) {
	when := since.UTC().Format(time.RFC3339Nano)
	st, err := asTx(t)
	if err != nil {
		return nil, 0, fmt.Errorf("eventstore: load %s since %s: %w", stream, when, err)
	}
	var head int64
	err = st.QueryRowContext(ctx, headQuery, stream).Scan(&head)
	if err != nil {
		return nil, 0, fmt.Errorf("eventstore: load %s since %s: %w", stream, when, err)
	}
	events, err := queryEvents(ctx, st, sinceQuery, stream, stream, ceilMicros(since))
	if err != nil {
		return nil, 0, fmt.Errorf("eventstore: load %s since %s: %w", stream, when, err)
	}
	return events, head, nil
}

// headQuery and sinceQuery are the queries of [EventStore.LoadSince], given
// the stream and, for sinceQuery, the stream again and since in
// microseconds.
const (
	headQuery  = `SELECT coalesce(max(version), 0) FROM events WHERE stream = ?`
	sinceQuery = `SELECT ` + eventColumns + ` FROM events WHERE stream = ? AND version > ` + stretchStart + ` ORDER BY version`
)

// stretchStart is the version after which a stream's recent stretch
// begins, given the stream and since in microseconds: that of its last
// event recorded before since, or 0. It walks the stream's versions from
// the head back and stops at the first such event, so it reads the
// recent events and one more, however long the stream.
const stretchStart = `coalesce((SELECT version FROM events WHERE stream = ? AND recorded_at < ? ORDER BY version DESC LIMIT 1), 0)`

// ceilMicros returns t in microseconds, as stored, rounded up: an event
// recorded at the start of t's microsecond is before t.
func ceilMicros(t time.Time) int64 {
	us := micros(t)
	if t.Nanosecond()%int(time.Microsecond) != 0 {
		us++
	}
	return us
}

// ReadAll returns up to limit events after position in commit order. An
// event's Position is {Commit: 0, Seq: its row's position}: writers take
// turns, so positions are handed out in the order their transactions commit,
// and no transaction can commit an event behind one that a reader has seen.
// A Position with a non-zero Commit, which this backend never makes, lies
// after every event.
func (s *EventStore) ReadAll(ctx context.Context, t uow.Tx, after eventstore.Position, limit int) ([]eventstore.Event, error) {
	return s.read(ctx, t, after, limit, "read all")
}

// ReadCommitted is [EventStore.ReadAll]: on SQLite every event that the
// log holds is committed and none can commit behind it.
func (s *EventStore) ReadCommitted(ctx context.Context, t uow.Tx, after eventstore.Position, limit int) ([]eventstore.Event, error) {
	return s.read(ctx, t, after, limit, "read committed")
}

func (s *EventStore) read(ctx context.Context, t uow.Tx, after eventstore.Position, limit int, op string) ([]eventstore.Event, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, fmt.Errorf("eventstore: %s: %w", op, err)
	}
	if limit < 1 {
		return nil, fmt.Errorf("eventstore: %s: limit must be at least 1, got %d", op, limit)
	}
	if after.Commit != 0 {
		return nil, nil
	}
	events, err := queryEvents(ctx, st,
		`SELECT `+eventColumns+` FROM events WHERE position > ? ORDER BY position LIMIT ?`, after.Seq, limit)
	if err != nil {
		return nil, fmt.Errorf("eventstore: %s: %w", op, err)
	}
	return events, nil
}

// Lock holds stream for t until t ends, as [eventstore.Store.Lock] describes.
// It has nothing to do: a unit of work holds the whole database's write
// lock, so writers of every stream already wait for each other. A
// read-only unit of work holds no lock, so Lock returns an error wrapping
// [uow.ErrReadOnly] in one.
func (s *EventStore) Lock(ctx context.Context, t uow.Tx, stream string) error {
	st, err := asTx(t)
	if err == nil && st.readOnly {
		err = errReadOnly
	}
	if err != nil {
		return fmt.Errorf("eventstore: lock %s: %w", stream, err)
	}
	return nil
}

// Truncate deletes the events of stream below version before, but never
// its last, as [eventstore.Store] describes.
func (s *EventStore) Truncate(ctx context.Context, t uow.Tx, stream string, before int64) (int64, error) {
	st, err := asTx(t)
	if err == nil && st.readOnly {
		err = errReadOnly
	}
	if err != nil {
		return 0, fmt.Errorf("eventstore: truncate %s: %w", stream, err)
	}
	res, err := st.ExecContext(ctx, `
DELETE FROM events WHERE stream = ? AND version < ?
AND version < (SELECT max(version) FROM events WHERE stream = ?)`, stream, before, stream)
	if err != nil {
		return 0, fmt.Errorf("eventstore: truncate %s: %w", stream, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("eventstore: truncate %s: %w", stream, err)
	}
	return n, nil
}

// queryEvents returns the events of q, which selects [eventColumns].
func queryEvents(ctx context.Context, st *tx, q string, args ...any) ([]eventstore.Event, error) {
	rows, err := st.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var events []eventstore.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	return events, rows.Err()
}

// scanEvent reads one row of [eventColumns].
func scanEvent(row interface{ Scan(dest ...any) error }, extra ...any) (eventstore.Event, error) {
	var e eventstore.Event
	var data, md string
	var recorded int64
	if err := row.Scan(append([]any{&e.ID, &e.Stream, &e.Version, &e.Type, &data, &md, &recorded, &e.Position.Seq, &e.SchemaVersion}, extra...)...); err != nil {
		return eventstore.Event{}, err
	}
	if err := json.Unmarshal([]byte(md), &e.Metadata); err != nil {
		return eventstore.Event{}, fmt.Errorf("decode metadata of %s: %w", e.ID, err)
	}
	e.Data, e.RecordedAt = []byte(data), fromMicros(recorded)
	return e, nil
}
