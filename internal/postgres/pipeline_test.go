package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// TestHeldWriteFailsAtCommit: an outbox message is written with the
// commit, not when Add returns. When that write fails (here its ID is
// taken), Do returns the store's error with PostgreSQL's beside it, the
// unit of work rolls back with the event appended before, and the runner
// works on afterwards.
func TestHeldWriteFailsAtCommit(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	runner, store, events := db.Runner(nil), db.Outbox(), db.Events()
	m, err := outbox.NewMessage("test.held", "hi", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	add := func(ctx context.Context, tx uow.Tx) error { return store.Add(ctx, tx, m) }
	if err := runner.Do(t.Context(), add); err != nil {
		t.Fatal(err)
	}
	e, err := eventstore.NewEvent("test.held", "e", eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	err = runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if _, err := events.Append(ctx, tx, "held", eventstore.NoStream, e); err != nil {
			return err
		}
		return add(ctx, tx)
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("Do with a taken message ID: %v, want a unique violation", err)
	}
	if errors.Is(err, uow.ErrUnavailable) {
		t.Errorf("Do with a taken message ID: %v, want no ErrUnavailable", err)
	}
	err = runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		got, err := events.Load(ctx, tx, "held", 1)
		if err == nil && len(got) != 0 {
			t.Errorf("the rolled-back unit of work left %d events", len(got))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
