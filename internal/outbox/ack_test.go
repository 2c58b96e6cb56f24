package outbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// ackWatch is the PostgreSQL outbox, with all its methods, telling the test
// when an AckAll fails and how many leases were acknowledged.
type ackWatch struct {
	*postgres.Outbox
	failed chan struct{}
	acked  atomic.Int64
	all    chan struct{}
	want   int64
	once   sync.Once
}

func (w *ackWatch) AckAll(ctx context.Context, leases []outbox.Lease) error {
	err := w.Outbox.AckAll(ctx, leases)
	if err != nil {
		select {
		case w.failed <- struct{}{}:
		default:
		}
		return err
	}
	if w.acked.Add(int64(len(leases))) >= w.want {
		w.once.Do(func() { close(w.all) })
	}
	return nil
}

// within fails t unless ch is ready within a bound.
func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// runFlap delivers a batch whose acknowledgement meets the database away,
// and brings the database back, before (stopFirst false) or after
// (stopFirst true) the relay is told to stop. Either way every delivery is
// acknowledged: the acker keeps trying within SettleTimeout, and Run waits
// for it.
func runFlap(t *testing.T, stopFirst bool) {
	t.Parallel()
	db, proxy := pgtest.NewBehindProxy(t)
	const n = 5
	store := &ackWatch{Outbox: db.Outbox().(*postgres.Outbox), failed: make(chan struct{}, 1), all: make(chan struct{}), want: n}
	gate := make(chan struct{})
	started := make(chan struct{}, n)
	var mu sync.Mutex
	calls := map[uuid.UUID]int{}
	relay, err := outbox.NewRelay(store, map[string]outbox.Handler{
		"mail": func(_ context.Context, m outbox.Message) error {
			mu.Lock()
			calls[m.ID]++
			mu.Unlock()
			started <- struct{}{}
			<-gate
			return nil
		},
	}, outbox.RelayConfig{Batch: n, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	for range n {
		addNow(t, db, store.Outbox)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	for range n {
		within(t, started, "the batch to reach its handlers")
	}
	proxy.Down()
	close(gate)
	within(t, store.failed, "an acknowledgement to fail")
	if stopFirst {
		cancel()
	}
	proxy.Up()
	within(t, store.all, "every delivery to be acknowledged")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	if err := relay.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	left, err := db.Outbox().Claim(t.Context(), time.Now().Add(time.Hour), time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d delivered messages are still in the outbox", len(left))
	}
	for id, c := range calls {
		if c != 1 {
			t.Errorf("message %s handled %d times", id, c)
		}
	}
}

// TestRelayAck checks the batched acknowledgements of Run: through a database that goes away and back, and under a clock in another zone.
func TestRelayAck(t *testing.T) {
	t.Run("through a database flap", testAckThroughADatabaseFlap)
	t.Run("with a clock in another zone", testAckAllWithAClockInAnotherZone)
}

func testAckThroughADatabaseFlap(t *testing.T) { runFlap(t, false) }

// A relay whose clock is in a zone far from UTC and reads nanoseconds
// acknowledges through AckAll's text arrays: each lease's end, formatted
// in UTC to the microsecond, is what Claim wrote. Nothing is left.
func testAckAllWithAClockInAnotherZone(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := &ackWatch{Outbox: db.Outbox().(*postgres.Outbox), failed: make(chan struct{}, 1), all: make(chan struct{}), want: 20}
	zone := time.FixedZone("UTC-09:30", -(9*3600 + 1800))
	clock := func() time.Time { return time.Now().In(zone).Add(987 * time.Nanosecond) }
	rec := newRecorder(20)
	relay, err := outbox.NewRelay(store, map[string]outbox.Handler{"mail": rec.handle},
		outbox.RelayConfig{Batch: 7, Interval: 5 * time.Millisecond}, outbox.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	for range 20 {
		addNow(t, db, store.Outbox)
	}
	cancel, done := runRelay(t, relay)
	rec.wait(t)
	within(t, store.all, "AckAll to acknowledge all twenty")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	left, err := db.Outbox().Claim(t.Context(), time.Now().Add(time.Hour), time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d messages acknowledged under a zoned clock are still there", len(left))
	}
}
