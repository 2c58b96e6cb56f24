package sqlite_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
)

// addTopicAt commits one message of topic created at now.
func addTopicAt(t *testing.T, runner uow.Runner, store outbox.Store, topic string, now time.Time) {
	t.Helper()
	m, err := outbox.NewMessage(topic, "hi", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error { return store.Add(ctx, tx, m) }); err != nil {
		t.Fatal(err)
	}
}

// TestRelayLimits runs the relay on SQLite at the edges of its config and clock: the tightest valid lease, a batch of one with two breakers to probe, and clocks in zones far from UTC.
func TestRelayLimits(t *testing.T) {
	t.Parallel()
	t.Run("drain with the tightest valid lease delivers", testDrainWithTheTightestValidLeaseDelivers)
	t.Run("breakers probed one at a time when the batch is full", testBreakersProbedOneAtATimeWhenTheBatchIsFull)
	t.Run("relays with zoned clocks acknowledge everything", testRelaysWithZonedClocksAcknowledgeEverything)
}

// On SQLite too, Drain on the real clock with the tightest lease Validate
// accepts delivers the first message of its claim rather than releasing it.
func testDrainWithTheTightestValidLeaseDelivers(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	store, runner := db.Outbox(), db.Runner(nil)
	var calls atomic.Int32
	relay, err := relay.New(store, map[string]outbox.Handler{
		"mail": func(context.Context, outbox.Message) error { calls.Add(1); return nil },
	}, outbox.RelayConfig{Timeout: 30 * time.Second, Lease: 30*time.Second + outbox.SettleTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	addTopicAt(t, runner, store, "mail", time.Now())
	for range 3 {
		if _, err := relay.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("three passes with Lease = Timeout+SettleTimeout ran the handler %d times, want 1", calls.Load())
	}
}

// On SQLite too, two breakers due to probe together with Batch 1 are
// probed one claim after the other, and both topics flow again.
func testBreakersProbedOneAtATimeWhenTheBatchIsFull(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	store, runner := db.Outbox(), db.Runner(clock)
	var down atomic.Bool
	down.Store(true)
	var mu sync.Mutex
	seen := map[string]map[uuid.UUID]bool{"mail": {}, "sms": {}}
	handler := func(topic string) outbox.Handler {
		return func(_ context.Context, m outbox.Message) error {
			if down.Load() {
				return errors.New("dial tcp: connection refused")
			}
			mu.Lock()
			seen[topic][m.ID] = true
			mu.Unlock()
			return nil
		}
	}
	relay, err := relay.New(store, map[string]outbox.Handler{"mail": handler("mail"), "sms": handler("sms")},
		outbox.RelayConfig{Batch: 1, MaxAttempts: 20}, relay.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	for _, topic := range []string{"mail", "sms"} {
		for range 3 {
			addTopicAt(t, runner, store, topic, now)
		}
	}
	if stats, err := relay.Drain(t.Context()); err != nil || stats.Retried != 6 {
		t.Fatalf("first pass: %+v, %v; want all six failed", stats, err)
	}
	down.Store(false)
	start := now.Add(5 * time.Second)
	for now = start; now.Sub(start) <= time.Hour; now = now.Add(3 * time.Second) {
		if _, err := relay.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		ok := len(seen["mail"]) == 3 && len(seen["sms"]) == 3
		mu.Unlock()
		if ok {
			return
		}
	}
	t.Errorf("an hour after both destinations came back: delivered %d mail and %d sms of 3 each",
		len(seen["mail"]), len(seen["sms"]))
}

// Two running relays, each on an Outbox value of its own over one file,
// with clocks in zones far from UTC that read sub-microsecond times:
// AckAll's JSON leases match what Claim stored, so every message is
// delivered once and acknowledged.
func testRelaysWithZonedClocksAcknowledgeEverything(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	const n = 60
	var mu sync.Mutex
	calls := map[uuid.UUID]int{}
	all := make(chan struct{})
	handle := func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		calls[m.ID]++
		if len(calls) == n && calls[m.ID] == 1 {
			close(all)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for i, offset := range []int{-(9*3600 + 1800), 13*3600 + 45*60} {
		zone := time.FixedZone("Z", offset)
		clock := func() time.Time { return time.Now().In(zone).Add(time.Duration(321+i) * time.Nanosecond) }
		relay, err := relay.New(db.Outbox(), map[string]outbox.Handler{"mail": handle},
			outbox.RelayConfig{Batch: 5, Interval: 5 * time.Millisecond}, relay.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		defer relay.Close()
		wg.Go(func() {
			if err := relay.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	store, runner := db.Outbox(), db.Runner(nil)
	for range n {
		addOne(t, runner, store)
	}
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		t.Fatal("not every message was delivered")
	}
	cancel()
	wg.Wait()
	for id, c := range calls {
		if c != 1 {
			t.Errorf("message %s handled %d times", id, c)
		}
	}
	if left := claimable(t, store); left != 0 {
		t.Errorf("%d delivered messages were not acknowledged", left)
	}
}
