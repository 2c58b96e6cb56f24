package relay_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
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
	rel, err := relay.New(store, map[string]outbox.Handler{
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
	defer rel.Close()
	for range n {
		addNow(t, db, store.Outbox)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rel.Run(ctx) }()
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
	if err := rel.Wait(t.Context()); err != nil {
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

// TestRelayAck checks the batched acknowledgements of Run: through a
// database that goes away and back, under a clock in another zone, and how
// long an acknowledgement waits for others.
func TestRelayAck(t *testing.T) {
	t.Run("through a database flap", testAckThroughADatabaseFlap)
	t.Run("with a clock in another zone", testAckAllWithAClockInAnotherZone)
	t.Run("waits for a batch's worth", testAckWaitsForABatchsWorth)
	t.Run("writes a keyed message's at once", testAckWritesAKeyedMessagesAtOnce)
	t.Run("writes at once when slots run short", testAckWritesAtOnceWhenSlotsRunShort)
	t.Run("writes what waits when the relay stops", testAckWritesWhatWaitsWhenTheRelayStops)
	t.Run("writes at once for a lease that would end first", testAckWritesAtOnceForALeaseThatWouldEndFirst)
}

// ackSizes is the PostgreSQL outbox, with all its methods, telling the
// test how many leases each AckAll acknowledged.
type ackSizes struct {
	*postgres.Outbox
	sizes chan int
}

func (w *ackSizes) AckAll(ctx context.Context, leases []outbox.Lease) error {
	err := w.Outbox.AckAll(ctx, leases)
	if err == nil {
		w.sizes <- len(leases)
	}
	return err
}

// ackSetup returns a relay of batch and lease over a store that reports
// its acknowledgements, whose acknowledgements would wait an hour for
// others to join them, with a handler of "mail" that reports each
// delivery, and one of "slow" that waits for gate.
func ackSetup(t *testing.T, batch int, lease time.Duration, gate <-chan struct{}) (*postgres.DB, *ackSizes, *relay.Relay, <-chan struct{}) {
	t.Helper()
	db := pgtest.New(t)
	store := &ackSizes{Outbox: db.Outbox().(*postgres.Outbox), sizes: make(chan int, 100)}
	handled := make(chan struct{}, 100)
	rel, err := relay.New(store, map[string]outbox.Handler{
		"mail": func(context.Context, outbox.Message) error {
			handled <- struct{}{}
			return nil
		},
		"slow": func(context.Context, outbox.Message) error {
			handled <- struct{}{}
			<-gate
			return nil
		},
	}, outbox.RelayConfig{Batch: batch, Interval: time.Hour, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	relay.SetAckDelay(rel, time.Hour)
	return db, store, rel, handled
}

// nextSize returns the size of the next AckAll, failing t when none comes
// within a bound.
func nextSize(t *testing.T, sizes <-chan int, what string) int {
	t.Helper()
	select {
	case n := <-sizes:
		return n
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return 0
	}
}

// Messages delivered one after the other are acknowledged together, once
// a batch's worth waits: no acknowledgement is written alone before.
func testAckWaitsForABatchsWorth(t *testing.T) {
	t.Parallel()
	db, store, rel, handled := ackSetup(t, 3, 2*time.Hour, nil)
	cancel, done := runRelay(t, rel)
	for i := range 3 {
		addNow(t, db, store.Outbox)
		within(t, handled, fmt.Sprintf("delivery %d", i+1))
	}
	if n := nextSize(t, store.sizes, "the acknowledgements"); n != 3 {
		t.Errorf("the first AckAll acknowledged %d messages, want the batch's 3 together", n)
	}
	stopRelay(t, cancel, done)
}

// A keyed message's acknowledgement is written at once: the next message
// of its key is due only once it is gone.
func testAckWritesAKeyedMessagesAtOnce(t *testing.T) {
	t.Parallel()
	db, store, rel, handled := ackSetup(t, 3, 2*time.Hour, nil)
	cancel, done := runRelay(t, rel)
	commitKeyed(t, db.Runner(nil), store.Outbox, "k")
	within(t, handled, "the keyed delivery")
	if n := nextSize(t, store.sizes, "the keyed message's acknowledgement"); n != 1 {
		t.Errorf("AckAll acknowledged %d messages, want the keyed one", n)
	}
	stopRelay(t, cancel, done)
}

// While the relay holds so many messages that fewer slots are free than
// two claims need, an acknowledgement is written at once: it frees a
// slot.
func testAckWritesAtOnceWhenSlotsRunShort(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	const batch = 2
	db, store, rel, handled := ackSetup(t, batch, 2*time.Hour, gate)
	cancel, done := runRelay(t, rel)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	defer close(gate)
	// Hold all but three of the relay's slots in handlers that wait.
	slow := relay.HeldBatches*batch - 3
	commit(t, db.Runner(nil), store.Outbox, "slow", slow)
	for i := range slow {
		within(t, handled, fmt.Sprintf("slow delivery %d", i+1))
	}
	addNow(t, db, store.Outbox)
	within(t, handled, "the delivery")
	if n := nextSize(t, store.sizes, "the acknowledgement"); n != 1 {
		t.Errorf("AckAll acknowledged %d messages, want the one delivered", n)
	}
}

// Run writes the acknowledgements that wait before it returns.
func testAckWritesWhatWaitsWhenTheRelayStops(t *testing.T) {
	t.Parallel()
	db, store, rel, handled := ackSetup(t, 3, 2*time.Hour, nil)
	cancel, done := runRelay(t, rel)
	addNow(t, db, store.Outbox)
	within(t, handled, "the delivery")
	stopRelay(t, cancel, done)
	if n := nextSize(t, store.sizes, "the acknowledgement at the stop"); n != 1 {
		t.Errorf("AckAll at the stop acknowledged %d messages, want 1", n)
	}
	left, err := db.Outbox().Claim(t.Context(), time.Now().Add(time.Hour), time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d delivered messages are still in the outbox", len(left))
	}
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
	rel, err := relay.New(store, map[string]outbox.Handler{"mail": rec.handle},
		outbox.RelayConfig{Batch: 7, Interval: 5 * time.Millisecond}, relay.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	for range 20 {
		addNow(t, db, store.Outbox)
	}
	cancel, done := runRelay(t, rel)
	rec.wait(t)
	within(t, store.all, "AckAll to acknowledge all twenty")
	stopRelay(t, cancel, done)
	left, err := db.Outbox().Claim(t.Context(), time.Now().Add(time.Hour), time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d messages acknowledged under a zoned clock are still there", len(left))
	}
}

// An acknowledgement whose lease would end before a write that waited
// could be retried for SettleTimeout is written at once: under the default
// lease, an hour's wait would outlast it.
func testAckWritesAtOnceForALeaseThatWouldEndFirst(t *testing.T) {
	t.Parallel()
	db, store, rel, handled := ackSetup(t, 3, outbox.DefaultLease, nil)
	cancel, done := runRelay(t, rel)
	addNow(t, db, store.Outbox)
	within(t, handled, "the delivery")
	if n := nextSize(t, store.sizes, "the acknowledgement"); n != 1 {
		t.Errorf("AckAll acknowledged %d messages, want the one delivered", n)
	}
	stopRelay(t, cancel, done)
}
