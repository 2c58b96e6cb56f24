package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
)

// applied is a test read model: the IDs of the events applied, in order.
type applied struct{ db *postgres.DB }

func newApplied(t *testing.T, db *postgres.DB) applied {
	t.Helper()
	if _, err := db.Pool().Exec(t.Context(), `CREATE TABLE logtest_applied (n bigserial PRIMARY KEY, id uuid NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return applied{db}
}

func (a applied) Record(ctx context.Context, tx uow.Tx, e eventstore.Event) error {
	stx, err := postgres.SQLTx(tx)
	if err != nil {
		return err
	}
	_, err = stx.ExecContext(ctx, `INSERT INTO logtest_applied (id) VALUES ($1)`, e.ID.String())
	return err
}

func (a applied) Recorded(ctx context.Context) ([]uuid.UUID, error) {
	rows, err := a.db.Pool().Query(ctx, `SELECT id FROM logtest_applied ORDER BY n`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// TestEventLogDeliversInLogOrderOnce is a first check of the PostgreSQL
// log: events of several units of work reach a router in ReadAll's order,
// each once, and their writes commit with the offset.
func TestEventLogDeliversInLogOrderOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	sink := newApplied(t, db)
	store := db.Events()
	var want []uuid.UUID
	for i := range 5 {
		err := db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			var events []eventstore.Event
			for j := range 10 {
				e, err := eventstore.NewEvent("test.happened", map[string]int{"i": i, "j": j}, eventstore.Metadata{})
				if err != nil {
					return err
				}
				events = append(events, e)
				want = append(want, e.ID)
			}
			_, err := store.Append(ctx, tx, fmt.Sprintf("test-%d", i%2), eventstore.Any, events...)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	log := db.Log(postgres.LogConfig{PollInterval: 10 * time.Millisecond, Batch: 7})
	defer log.Close()
	sub, err := log.Subscriber("test.v1", nil, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := 0
	done := make(chan struct{})
	router.AddConsumerHandler("test", projections.Topic, sub, func(msg *message.Message) error {
		e, err := projections.EventFromMessage(msg)
		if err != nil {
			return err
		}
		if err := log.Apply(msg, time.Now(), func(ctx context.Context, tx uow.Tx) error { return sink.Record(ctx, tx, e) }); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if seen++; seen == len(want) {
			close(done)
		}
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- router.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("not every event was delivered")
	}
	// The last batch commits after its last event is acknowledged.
	var got []uuid.UUID
	for deadline := time.Now().Add(30 * time.Second); len(got) < len(want) && time.Now().Before(deadline); {
		if got, err = sink.Recorded(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("recorded %d events %v, want %d in log order", len(got), got, len(want))
	}
}
