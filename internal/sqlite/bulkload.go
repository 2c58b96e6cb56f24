package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// loadChunk is how many events one INSERT of [LoadEvents] takes: 7,000
// parameters, below SQLite's limit of 32,766.
const loadChunk = 1000

// LoadEvents writes events into the events table as they are given, their
// Stream, Version and RecordedAt set by the caller, in multi-row INSERTs in
// the transaction of t: a benchmark fills a database with a history this
// way in a fraction of the time appends would take. It checks no version:
// the caller numbers each stream from 1 without gaps, or from where its
// truncated history left off. The position is the column's, as for an
// appended event, so the log's readers find the rows in order.
func LoadEvents(ctx context.Context, t uow.Tx, events []eventstore.Event) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("eventstore: load events: %w", err)
	}
	args := make([]any, 0, 8*min(len(events), loadChunk))
	for first := 0; first < len(events); first += loadChunk {
		chunk := events[first:min(first+loadChunk, len(events))]
		args = args[:0]
		for _, e := range chunk {
			if err := eventstore.Check(e.Stream, e); err != nil {
				return fmt.Errorf("eventstore: load events: %w", err)
			}
			md, err := json.Marshal(e.Metadata)
			if err != nil {
				return fmt.Errorf("eventstore: load events: encode metadata of %s: %w", e.ID, err)
			}
			args = append(args, e.ID, e.Stream, e.Version, e.Type, string(e.Data), string(md), micros(e.RecordedAt), eventstore.StoredSchemaVersion(e))
		}
		q := `INSERT INTO events (id, stream, version, type, data, metadata, recorded_at, schema_version) VALUES ` + valueRows(len(chunk), 8)
		if _, err := st.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("eventstore: load events: %w", err)
		}
	}
	st.wakeLog()
	return nil
}

// EventsSize returns the bytes of the pages that the events table and its
// indexes take in the file (dbstat), and how many events it holds.
func (db *DB) EventsSize(ctx context.Context) (bytes, events int64, err error) {
	err = db.read.QueryRowContext(ctx, `
SELECT (SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'events' OR name IN (SELECT name FROM sqlite_schema WHERE tbl_name = 'events' AND type = 'index')),
	(SELECT count(*) FROM events)`).Scan(&bytes, &events)
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: size of the events: %w", err)
	}
	return bytes, events, nil
}
