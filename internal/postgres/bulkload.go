package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// LoadEvents writes events into the events table as they are given, their
// Stream, Version, RecordedAt and SchemaVersion set by the caller, with one COPY in the
// transaction of t: a benchmark fills a database with a history this way
// in a fraction of the time appends would take. It checks no version: the
// caller numbers each stream from 1 without gaps, or from where its
// truncated history left off. The position and the log's transaction id
// are the columns' defaults, as for an appended event, so the log's
// readers find the rows in the order of their transactions and positions.
// The streams that are new are added first, in the order of their names,
// so that loads in concurrent units of work never wait for each other in
// a circle. Statements held by t (a data key that the keyring added) are
// sent first.
func LoadEvents(ctx context.Context, t uow.Tx, events []eventstore.Event) error {
	pt, err := asTx(t)
	if err != nil {
		return fmt.Errorf("eventstore: load events: %w", err)
	}
	if _, ro := pt.q.(readOnlyTx); ro {
		return fmt.Errorf("eventstore: load events: %s: %w", pkg, uow.ErrReadOnly)
	}
	for _, e := range events {
		if err := eventstore.Check(e.Stream, e); err != nil {
			return fmt.Errorf("eventstore: load events: %w", err)
		}
	}
	// A load commits often, and what it writes is the benchmark's
	// scratch: its commits need not wait for the WAL to reach the disk.
	if err := pt.pipe.hold(`SET LOCAL synchronous_commit TO off`, nil, func(err error) error { return err }); err != nil {
		return fmt.Errorf("eventstore: load events: %w", err)
	}
	if err := pt.pipe.flush(ctx); err != nil {
		return fmt.Errorf("eventstore: load events: %w", err)
	}
	ids, err := streamIDs(ctx, pt.pipe.conn, events)
	if err != nil {
		return fmt.Errorf("eventstore: load events: %w", err)
	}
	rows := make([][]any, len(events))
	for i, e := range events {
		md, err := encodeMetadata(e.Metadata)
		if err != nil {
			return fmt.Errorf("eventstore: load events: encode metadata of %s: %w", e.ID, err)
		}
		// jsonb's text input: COPY in binary sends jsonb as a version byte
		// and the text, which pgx's codec makes of a string.
		rows[i] = []any{pgtype.UUID{Bytes: e.ID, Valid: true}, ids[e.Stream], e.Version, e.RecordedAt, int16(eventstore.StoredSchemaVersion(e)),
			e.Type, string(e.Data), e.Metadata.CorrelationID, e.Metadata.CausationID, md}
	}
	n, err := pt.pipe.conn.CopyFrom(ctx, pgx.Identifier{"events"},
		[]string{"id", "stream_id", "version", "recorded_at", "schema_version", "type", "data", "correlation_id", "causation_id", "metadata"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("eventstore: load events: %w", err)
	}
	if n != int64(len(events)) {
		return fmt.Errorf("eventstore: load events: copied %d of %d", n, len(events))
	}
	pt.wakeLog()
	return nil
}

// streamIDs adds the streams of events that are not stored, and returns
// the id of each stream of events by its name. Its statements are planned
// anew each time (no prepared statement): a plan cached while
// event_streams held a few rows would scan it whole once it holds many,
// and nothing analyzes the table during a load.
func streamIDs(ctx context.Context, conn *pgx.Conn, events []eventstore.Event) (map[string]int64, error) {
	names := make([]string, 0, len(events))
	for _, e := range events {
		names = append(names, e.Stream)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	// A name that a concurrent load is adding waits for it, and is then
	// read by the second statement, which sees what committed meanwhile.
	if _, err := conn.Exec(ctx, `
INSERT INTO event_streams (name)
SELECT n FROM unnest($1::text[]) AS n WHERE NOT EXISTS (SELECT FROM event_streams WHERE name = n)
ORDER BY n
ON CONFLICT (name) DO NOTHING`, pgx.QueryExecModeExec, names); err != nil {
		return nil, fmt.Errorf("add streams: %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT name, id FROM event_streams WHERE name = ANY($1::text[])`, pgx.QueryExecModeExec, names)
	if err != nil {
		return nil, fmt.Errorf("read streams: %w", err)
	}
	ids := make(map[string]int64, len(names))
	var name string
	var id int64
	_, err = pgx.ForEachRow(rows, []any{&name, &id}, func() error {
		ids[name] = id
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read streams: %w", err)
	}
	if len(ids) != len(names) {
		return nil, fmt.Errorf("read streams: %d of %d", len(ids), len(names))
	}
	return ids, nil
}

// EventsSize returns the bytes the events take on disk, those of the
// events table and of event_streams, each with its indexes and TOAST
// (pg_total_relation_size), and how many events there are.
func (db *DB) EventsSize(ctx context.Context) (bytes, events int64, err error) {
	err = db.main().QueryRow(ctx, `
SELECT pg_total_relation_size('events') + pg_total_relation_size('event_streams'), (SELECT count(*) FROM events)`).Scan(&bytes, &events)
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: size of the events: %w", unavailable(ctx, err))
	}
	return bytes, events, nil
}

// Vacuum vacuums and analyzes the events and their streams, as an
// operator does after a bulk load, and as autovacuum would in time: it
// gathers the planner's statistics, and summarizes the block ranges of
// events_position, a BRIN index, which reads by position otherwise read
// whole (see [Log.Behind]). It leaves a database without events as it
// is: an empty table vacuumed or analyzed counts as known to be empty,
// and the plans that connections make for that, and keep, read the
// tables whole once they have grown, where autovacuum would analyze them
// again.
func (db *DB) Vacuum(ctx context.Context) error {
	var some bool
	if err := db.main().QueryRow(ctx, `SELECT EXISTS (SELECT FROM events)`).Scan(&some); err != nil {
		return fmt.Errorf("postgres: vacuum the events: %w", unavailable(ctx, err))
	}
	if !some {
		return nil
	}
	if _, err := db.main().Exec(ctx, `VACUUM (ANALYZE) events, event_streams`); err != nil {
		return fmt.Errorf("postgres: vacuum the events: %w", unavailable(ctx, err))
	}
	return nil
}
