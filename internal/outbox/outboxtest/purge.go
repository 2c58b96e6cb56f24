package outboxtest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
)

// Purger: Addressed finds a person's mail in every state, and Delete
// deletes it and the messages of their keys, in the unit of work given,
// and nothing else.
func testPurge(t *testing.T, s suite) {
	ada := func(n int) outbox.Message {
		return s.msg(t, "test.mail", map[string]any{"to": "ada@example.com", "n": n}, base.Add(time.Duration(n)*time.Second))
	}
	due, leased, buried := ada(1), ada(2), ada(3)
	bob := s.msg(t, "test.mail", map[string]any{"to": "bob@example.com"}, base)
	elsewhere := s.msg(t, "test.other", map[string]any{"to": "ada@example.com"}, base)
	k1, k1again, k2 := s.keyed(t, "dest:1", 1, base), s.keyed(t, "dest:1", 2, base), s.keyed(t, "dest:2", 1, base)
	s.add(t, leased, buried)
	s.claimIDs(t, base.Add(time.Hour), 10, leased, buried)
	s.bury(t, buried.ID, "550")
	s.add(t, due, bob, elsewhere, k1, k1again, k2)

	var found []outbox.Message
	read := func(ctx context.Context, tx uow.Tx) error {
		var err error
		found, err = s.Store.Addressed(ctx, tx, "test.mail", "to", "ada@example.com")
		return err
	}
	if err := s.Runner.Do(t.Context(), read); err != nil {
		t.Fatal(err)
	}
	ids := func(msgs []outbox.Message) []uuid.UUID {
		out := make([]uuid.UUID, len(msgs))
		for i, m := range msgs {
			out[i] = m.ID
		}
		slices.SortFunc(out, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		return out
	}
	if got, want := ids(found), ids([]outbox.Message{due, leased, buried}); !slices.Equal(got, want) {
		t.Fatalf("Addressed found %v, want Ada's mail in every state %v", got, want)
	}
	for _, m := range found {
		if m.Topic != "test.mail" || len(m.Payload) == 0 || m.CreatedAt.IsZero() {
			t.Errorf("Addressed returned %+v, want the message as added", m)
		}
	}
	if err := s.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		_, err := s.Store.Addressed(ctx, tx, "test.mail", "to'); --", "x")
		return err
	}); err == nil {
		t.Error("Addressed of a field that is no plain key: accepted")
	}

	del := func(ids []uuid.UUID, keys []string, rollback bool) int64 {
		var n int64
		err := s.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			var err error
			if n, err = s.Store.Delete(ctx, tx, ids, keys); err != nil {
				return err
			}
			if rollback {
				return errRollback
			}
			return nil
		})
		if err != nil && !errors.Is(err, errRollback) {
			t.Fatal(err)
		}
		return n
	}
	del(ids(found), []string{"dest:1"}, true)
	if n := del(nil, nil, false); n != 0 {
		t.Errorf("Delete of nothing = %d", n)
	}
	held := func(now time.Time, want ...outbox.Message) {
		t.Helper()
		if got := ids(s.claim(t, now, lease, 20)); !slices.Equal(got, ids(want)) {
			t.Errorf("claimable at %s: %v, want %v", now, got, ids(want))
		}
	}
	// Rolled back: everything is still there (the buried message apart,
	// which no claim returns).
	held(farFuture, due, bob, elsewhere, k1, k2, leased)
	if n := del(ids(found), []string{"dest:1", "dest:9"}, false); n != 5 {
		t.Errorf("Delete = %d, want Ada's 3 messages and the 2 of key dest:1", n)
	}
	if err := s.Runner.Do(t.Context(), read); err != nil || len(found) != 0 {
		t.Errorf("Addressed after Delete = %v, %v; want none", found, err)
	}
	held(farFuture.Add(time.Hour), bob, elsewhere, k2)
}
