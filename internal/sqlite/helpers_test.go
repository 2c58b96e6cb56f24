package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
)

func mustV7(t testing.TB) uuid.UUID {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// claimable counts the messages a claim far in the future returns.
func claimable(t *testing.T, store outbox.Store) int {
	t.Helper()
	msgs, err := store.Claim(t.Context(), time.Now().Add(24*time.Hour), time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	return len(msgs)
}

// addMessage adds one message for topic "mail" in tx.
func addMessage(ctx context.Context, store outbox.Store, tx uow.Tx) error {
	m, err := outbox.NewMessage("mail", "hi", tx.Now())
	if err != nil {
		return err
	}
	return store.Add(ctx, tx, m)
}

// addOne adds one message in a committed unit of work.
func addOne(t *testing.T, runner uow.Runner, store outbox.Store) {
	t.Helper()
	if err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error { return addMessage(ctx, store, tx) }); err != nil {
		t.Fatalf("add: %v", err)
	}
}
