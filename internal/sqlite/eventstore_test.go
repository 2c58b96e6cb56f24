package sqlite_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
)

// eventStoreForeignTx is a [uow.Tx] of no backend.
type eventStoreForeignTx struct{}

func (eventStoreForeignTx) Now() time.Time { return time.Now() }

// TestEventStore checks what the SQLite event store promises beyond the conformance suite.
func TestEventStore(t *testing.T) {
	t.Parallel()
	t.Run("ForeignTx", testEventStoreForeignTx)
	t.Run("RefusesJSONThatSQLiteRefuses", testEventStoreRefusesJSONThatSQLiteRefuses)
	t.Run("Positions", testEventStorePositions)
}

func testEventStoreForeignTx(t *testing.T) {
	t.Parallel()
	store := &sqlite.EventStore{}
	ctx := t.Context()
	e, err := eventstore.NewEvent("test.happened", map[string]int{"n": 1}, eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, eventStoreForeignTx{}, "s", eventstore.Any, e); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("Append error = %v, want ErrForeignTx", err)
	}
	if _, err := store.Load(ctx, eventStoreForeignTx{}, "s", 0); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("Load error = %v, want ErrForeignTx", err)
	}
	if _, err := store.ReadAll(ctx, eventStoreForeignTx{}, eventstore.Position{}, 10); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("ReadAll error = %v, want ErrForeignTx", err)
	}
	if _, err := store.ReadCommitted(ctx, eventStoreForeignTx{}, eventstore.Position{}, 10); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("ReadCommitted error = %v, want ErrForeignTx", err)
	}
	if err := store.Lock(ctx, eventStoreForeignTx{}, "s"); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("Lock error = %v, want ErrForeignTx", err)
	}
	if _, _, err := store.LoadSince(ctx, eventStoreForeignTx{}, "s", time.Now()); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("LoadSince error = %v, want ErrForeignTx", err)
	}
}

// JSON that encoding/json accepts but SQLite's JSON functions refuse (nested
// deeper than SQLite's 1000 levels) is an invalid event, and writes nothing.
func testEventStoreRefusesJSONThatSQLiteRefuses(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	store := db.Events()
	deep := eventstore.Event{ID: mustV7(t), Type: "test.deep",
		Data: []byte(strings.Repeat("[", 1500) + strings.Repeat("]", 1500))}
	ok, err := eventstore.NewEvent("test.ok", 1, eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	var appendErr error
	err = db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		_, appendErr = store.Append(ctx, tx, "s", eventstore.NoStream, ok, deep)
		return nil // Commit anyway: nothing may have been written.
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(appendErr, eventstore.ErrInvalidEvent) {
		t.Errorf("Append of JSON nested 1500 deep: %v, want ErrInvalidEvent", appendErr)
	}
	err = db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		got, err := store.Load(ctx, tx, "s", 0)
		if err == nil && len(got) != 0 {
			t.Errorf("the failed append left %d events", len(got))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Positions are commit order with Commit 0, and a position this backend
// never makes lies after every event.
func testEventStorePositions(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	store := db.Events()
	runner := db.Runner(nil)
	for _, stream := range []string{"b", "a", "b"} {
		err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			e, err := eventstore.NewEvent("test.happened", stream, eventstore.Metadata{})
			if err != nil {
				return err
			}
			_, err = store.Append(ctx, tx, stream, eventstore.Any, e)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		all, err := store.ReadAll(ctx, tx, eventstore.Position{}, 10)
		if err != nil {
			return err
		}
		for i, e := range all {
			if want := (eventstore.Position{Seq: int64(i + 1)}); e.Position != want {
				t.Errorf("ReadAll[%d].Position = %+v, want %+v", i, e.Position, want)
			}
		}
		beyond, err := store.ReadAll(ctx, tx, eventstore.Position{Commit: 1}, 10)
		if err != nil {
			return err
		}
		if len(beyond) != 0 {
			t.Errorf("ReadAll after {Commit: 1} returned %d events, want none", len(beyond))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
