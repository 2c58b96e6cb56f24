package outboxtest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
)

// keyed returns a new message of key created at at.
func (s suite) keyed(t *testing.T, key string, n int, at time.Time) outbox.Message {
	t.Helper()
	m := s.msg(t, "test.keyed", map[string]any{"key": key, "n": n}, at)
	m.Key = key
	return m
}

// Key: a keyed message comes back with its key, from Claim and from the
// operators' views.
func testKeyRoundTrips(t *testing.T, s suite) {
	m := s.keyed(t, "user-0190a3b1 ünï", 1, base)
	s.add(t, m)
	got := s.claimIDs(t, base, 10, m)
	checkMessage(t, got[0], m, 1)
	rec, err := s.Store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkMessage(t, rec.Message, m, 1)
}

// Key: "a store does not claim it while a message of that key added before
// it is still held": not while it is leased, nor after its lease ends, nor
// while it waits for a retry; messages of other keys, and without one, go
// on. The order is that of the Adds, not of creation or due times.
func testKeyOneAtATime(t *testing.T, s suite) {
	a1, a2 := s.keyed(t, "a", 1, base), s.keyed(t, "a", 2, base)
	b1 := s.keyed(t, "b", 1, base)
	free := s.msg(t, "test.free", nil, base)
	s.add(t, a1, a2, b1, free)
	// Added later, created earlier than all: still after a1 and a2.
	a3 := s.keyed(t, "a", 3, base.Add(-time.Hour))
	s.add(t, a3)

	s.claimIDs(t, base, 10, a1, b1, free)
	s.nothingDue(t, base)
	s.ack(t, b1.ID)
	s.ack(t, free.ID)
	// a1's lease ends: a1 is due again, not a2.
	s.claimIDs(t, base.Add(lease), 10, a1)
	s.retry(t, a1.ID, base.Add(time.Hour), "503")
	s.nothingDue(t, base.Add(time.Hour-time.Millisecond))
	s.claimIDs(t, base.Add(time.Hour), 10, a1)
	s.ack(t, a1.ID)
	got := s.claimIDs(t, base.Add(time.Hour), 10, a2)
	checkMessage(t, got[0], a2, 1)
	s.ack(t, a2.ID)
	s.claimIDs(t, base.Add(time.Hour), 10, a3)
}

// Key: "one that is buried stops holding them."
func testKeyBuriedStopsHolding(t *testing.T, s suite) {
	a1, a2 := s.keyed(t, "a", 1, base), s.keyed(t, "a", 2, base)
	s.add(t, a1, a2)
	s.claimIDs(t, base, 10, a1)
	s.bury(t, a1.ID, "no handler")
	s.claimIDs(t, base, 10, a2)
}

// Key: a buried message that an operator requeues takes its place after
// the messages of its key added meanwhile, so the key stays one at a time.
func testKeyRequeuedGoesLast(t *testing.T, s suite) {
	a1, a2 := s.keyed(t, "a", 1, base), s.keyed(t, "a", 2, base)
	s.add(t, a1, a2)
	s.claimIDs(t, base, 10, a1)
	s.bury(t, a1.ID, "gone")
	s.claimIDs(t, base, 10, a2)
	if err := s.Store.Requeue(t.Context(), a1.ID, base); err != nil {
		t.Fatal(err)
	}
	s.nothingDue(t, base)
	s.ack(t, a2.ID)
	s.claimIDs(t, base, 10, a1)
}

// Key: claimers that run at once and acknowledge what they claim never hold
// two messages of one key at a time, and take each key's messages in the
// order they were added.
func testKeyConcurrent(t *testing.T, s suite) {
	const keys, perKey, claimers, limit = 16, 12, 6, 5
	// Interleaved over many Adds, as the commands of many users are.
	order := map[string][]uuid.UUID{}
	for i := range perKey {
		var msgs []outbox.Message
		for k := range keys {
			key := fmt.Sprintf("key-%02d", k)
			m := s.keyed(t, key, i, base)
			msgs = append(msgs, m)
			order[key] = append(order[key], m.ID)
		}
		s.add(t, msgs...)
	}
	var (
		mu      sync.Mutex
		held    = map[string]uuid.UUID{}
		claimed = map[string][]uuid.UUID{}
		acked   int
	)
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for range claimers {
		wg.Go(func() {
			for {
				mu.Lock()
				done := acked == keys*perKey
				mu.Unlock()
				if done || time.Now().After(deadline) || t.Failed() {
					return
				}
				got, err := s.Store.Claim(t.Context(), base, time.Hour, limit)
				if err != nil {
					t.Errorf("concurrent Claim: %v", err)
					return
				}
				mu.Lock()
				for _, m := range got {
					if other, ok := held[m.Key]; ok {
						t.Errorf("%s claimed while %s of its key is held", m.ID, other)
					}
					held[m.Key] = m.ID
					claimed[m.Key] = append(claimed[m.Key], m.ID)
				}
				mu.Unlock()
				for _, m := range got {
					mu.Lock()
					delete(held, m.Key)
					acked++
					mu.Unlock()
					// Acknowledged after it is no longer counted as held,
					// so that a claim that follows the Ack finds the map
					// already clear.
					if err := s.Store.Ack(t.Context(), m.ID); err != nil {
						t.Errorf("concurrent Ack(%s): %v", m.ID, err)
					}
				}
			}
		})
	}
	wg.Wait()
	if acked != keys*perKey {
		t.Fatalf("acknowledged %d of %d messages within a minute", acked, keys*perKey)
	}
	for key, want := range order {
		got := claimed[key]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("key %s claimed in the order %v, want the order added %v", key, got, want)
		}
	}
}
