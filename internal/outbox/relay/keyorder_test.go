package relay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// commitKeyed adds one message per key in keys, in that order, in one unit
// of work.
func commitKeyed(t *testing.T, runner uow.Runner, store outbox.Store, keys ...string) []outbox.Message {
	t.Helper()
	var msgs []outbox.Message
	err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		msgs = msgs[:0]
		for i, k := range keys {
			m, err := outbox.NewMessage("mail", map[string]any{"key": k, "n": i}, tx.Now())
			if err != nil {
				return err
			}
			m.Key = k
			msgs = append(msgs, m)
		}
		return store.Add(ctx, tx, msgs...)
	})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestRelayKeyOrder checks that the messages of one key are delivered one at a time, in order, by Run and by Drain.
func TestRelayKeyOrder(t *testing.T) {
	t.Run("run delivers a key in order and others in parallel", testRelayDeliversAKeyInOrderAndOthersInParallel)
	t.Run("drain delivers every message of a key", testDrainDeliversEveryMessageOfAKey)
}

// A running relay delivers the messages of one key one at a time, in the
// order they were added, while other keys go on in parallel; the next of a
// key goes out as soon as the one before is acknowledged, not at the next
// poll (an hour away here).
func testRelayDeliversAKeyInOrderAndOthersInParallel(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := db.Outbox()
	var mu sync.Mutex
	var order []string
	inFlight := map[string]bool{}
	started := make(chan string, 100)
	release := make(chan struct{})
	handle := func(ctx context.Context, m outbox.Message) error {
		mu.Lock()
		if inFlight[m.Key] {
			t.Errorf("message %s of key %s handed over while another of its key is in flight", m.ID, m.Key)
		}
		inFlight[m.Key] = true
		order = append(order, fmt.Sprintf("%s%s", m.Key, m.Payload))
		mu.Unlock()
		started <- m.Key
		if m.Key == "ada" {
			<-release // The first of ada's holds the rest of them.
		}
		mu.Lock()
		inFlight[m.Key] = false
		mu.Unlock()
		return nil
	}
	rel, err := relay.New(store, map[string]outbox.Handler{"mail": handle}, outbox.RelayConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	commitKeyed(t, db.Runner(nil), store, "ada", "ada", "grace", "ada")
	cancel, done := runRelay(t, rel)
	await := func(want string) {
		t.Helper()
		select {
		case got := <-started:
			if got != want {
				t.Fatalf("started a message of %s, want one of %s", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no message of %s started", want)
		}
	}
	// ada's first and grace's start together; ada's others wait.
	first, second := <-started, <-started
	if !(first == "ada" && second == "grace" || first == "grace" && second == "ada") {
		t.Fatalf("started %s and %s, want ada's first and grace's at once", first, second)
	}
	select {
	case k := <-started:
		t.Fatalf("a message of %s started while ada's first was in flight", k)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	await("ada")
	await("ada")
	stopRelay(t, cancel, done)
	mu.Lock()
	defer mu.Unlock()
	var ada []string
	for _, o := range order {
		if o[:3] == "ada" {
			ada = append(ada, o)
		}
	}
	if want := []string{`ada{"key":"ada","n":0}`, `ada{"key":"ada","n":1}`, `ada{"key":"ada","n":3}`}; fmt.Sprint(ada) != fmt.Sprint(want) {
		t.Errorf("ada's messages in the order %v, want %v", ada, want)
	}
}

// Drain goes on past a short claim when it settled a keyed message, since
// the next of its key is due then: one pass delivers a key's messages.
func testDrainDeliversEveryMessageOfAKey(t *testing.T) {
	f := newFixture(t)
	var got []string
	f.handle = func(_ context.Context, m outbox.Message) error {
		got = append(got, string(m.Payload))
		return nil
	}
	commitKeyed(t, f.runner, f.store, "ada", "ada", "ada")
	if stats := f.drain(t); stats.Delivered != 3 {
		t.Fatalf("one pass: %+v, want the three of the key delivered", stats)
	}
	if want := `[{"key":"ada","n":0} {"key":"ada","n":1} {"key":"ada","n":2}]`; fmt.Sprint(got) != want {
		t.Errorf("delivered %v, want %s", got, want)
	}
}
