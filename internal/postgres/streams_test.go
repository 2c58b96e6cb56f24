package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// TestEventStreams checks the table that names the streams: what an
// append adds to it, and what reads do when an event's stream is gone.
func TestEventStreams(t *testing.T) {
	t.Parallel()
	t.Run("FailedAppendsAddNoStream", testFailedAppendsAddNoStream)
	t.Run("ReadsFailOnAnEventWithoutItsStream", testReadsFailOnAnEventWithoutItsStream)
}

// An append that fails and whose unit of work commits anyway leaves no
// row in event_streams, and one that succeeds leaves exactly one.
func testFailedAppendsAddNoStream(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	runner, store := db.Runner(nil), db.Events()
	ctx := t.Context()
	stored := newEventForTest(t)
	err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		_, err := store.Append(ctx, tx, "kept", eventstore.NoStream, stored)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		events  []eventstore.Event
		at      eventstore.Expected
		wantErr error
	}{
		{"a version the new stream is not at", []eventstore.Event{newEventForTest(t)}, eventstore.Exactly(3), eventstore.ErrConcurrency},
		{"several at a version the new stream is not at", []eventstore.Event{newEventForTest(t), newEventForTest(t)}, eventstore.Exactly(1), eventstore.ErrConcurrency},
		{"an ID stored in another stream", []eventstore.Event{stored}, eventstore.NoStream, eventstore.ErrDuplicateEvent},
		{"IDs of which one is stored", []eventstore.Event{newEventForTest(t), stored}, eventstore.Any, eventstore.ErrDuplicateEvent},
	} {
		err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			_, err := store.Append(ctx, tx, "refused", tc.at, tc.events...)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: append: %v, want %v", tc.name, err, tc.wantErr)
			}
			return nil // Commit what the append left.
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	rows, err := db.Pool().Query(ctx, `SELECT name FROM event_streams ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "kept" {
		t.Errorf("event_streams holds %q, want only the stream appended to", names)
	}
}

// No foreign key holds an event to its stream: an event whose stream's
// row was deleted by hand fails the reads of the log, which never pass
// over it.
func testReadsFailOnAnEventWithoutItsStream(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	runner, store := db.Runner(nil), db.Events()
	ctx := t.Context()
	err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		if _, err := store.Append(ctx, tx, "gone", eventstore.NoStream, newEventForTest(t)); err != nil {
			return err
		}
		_, err := store.Append(ctx, tx, "kept", eventstore.NoStream, newEventForTest(t))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, `DELETE FROM event_streams WHERE name = 'gone'`); err != nil {
		t.Fatal(err)
	}
	err = runner.Read(ctx, func(ctx context.Context, tx uow.Tx) error {
		events, err := store.ReadCommitted(ctx, tx, eventstore.Position{}, 10)
		if err == nil {
			t.Errorf("the log read %d events and no error, though one has no stream", len(events))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
