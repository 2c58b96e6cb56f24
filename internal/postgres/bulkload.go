package postgres

import (
	"context"
	"encoding/json"
	"fmt"

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
// Statements held by t (a data key that the keyring added) are sent first.
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
	rows := make([][]any, len(events))
	for i, e := range events {
		md, err := json.Marshal(e.Metadata)
		if err != nil {
			return fmt.Errorf("eventstore: load events: encode metadata of %s: %w", e.ID, err)
		}
		// jsonb's text input: COPY in binary sends jsonb as a version byte
		// and the text, which pgx's codec makes of a string.
		rows[i] = []any{pgtype.UUID{Bytes: e.ID, Valid: true}, e.Stream, e.Version, e.Type, string(e.Data), string(md), e.RecordedAt, int16(eventstore.StoredSchemaVersion(e))}
	}
	n, err := pt.pipe.conn.CopyFrom(ctx, pgx.Identifier{"events"},
		[]string{"id", "stream", "version", "type", "data", "metadata", "recorded_at", "schema_version"}, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("eventstore: load events: %w", err)
	}
	if n != int64(len(events)) {
		return fmt.Errorf("eventstore: load events: copied %d of %d", n, len(events))
	}
	pt.wakeLog()
	return nil
}

// EventsSize returns the bytes the events table takes on disk with its
// indexes and TOAST (pg_total_relation_size), and how many events it
// holds.
func (db *DB) EventsSize(ctx context.Context) (bytes, events int64, err error) {
	err = db.main().QueryRow(ctx, `SELECT pg_total_relation_size('events'), (SELECT count(*) FROM events)`).Scan(&bytes, &events)
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: size of the events: %w", unavailable(ctx, err))
	}
	return bytes, events, nil
}

// Analyze gathers the planner's statistics of the events table, as an
// operator does after a bulk load, and as autovacuum would in time.
func (db *DB) Analyze(ctx context.Context) error {
	if _, err := db.main().Exec(ctx, `ANALYZE events`); err != nil {
		return fmt.Errorf("postgres: analyze the events: %w", unavailable(ctx, err))
	}
	return nil
}
