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

// ackWatch is the PostgreSQL outbox, every capability kept, telling the test
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
	store := &ackWatch{Outbox: db.Outbox(), failed: make(chan struct{}, 1), all: make(chan struct{}), want: n}
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

func TestAttackRunAcknowledgesThroughADatabaseFlap(t *testing.T) { runFlap(t, false) }

// Shutdown while the acker is retrying against a database that is away:
// Run waits for the acker, which writes the acknowledgements once the
// database is back.
func TestAttackShutdownWhileTheAckerFlushes(t *testing.T) { runFlap(t, true) }

// Three relays run on one database; on one of them Drain runs beside Run,
// again and again, sharing its room and breakers. No message is handled
// twice or by two goroutines at once, none is left, no relay ever has more
// than the 4×Batch handlers running that its room allows (Drain shares it),
// and each relay ends with nothing held.
func TestAttackRunAndDrainOnOneRelayBesideOtherRelays(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store, runner := db.Outbox(), db.Runner(nil)
	const n, batch = 400, 4
	var mu sync.Mutex
	calls := map[uuid.UUID]int{}
	running := map[uuid.UUID]int{}
	var dup atomic.Int32
	all := make(chan struct{})
	type relayState struct {
		relay      *outbox.Relay
		busy, most atomic.Int32
	}
	var relays []*relayState
	for range 3 {
		rs := &relayState{}
		relay, err := outbox.NewRelay(store, map[string]outbox.Handler{
			"mail": func(_ context.Context, m outbox.Message) error {
				b := rs.busy.Add(1)
				defer rs.busy.Add(-1)
				for {
					most := rs.most.Load()
					if b <= most || rs.most.CompareAndSwap(most, b) {
						break
					}
				}
				mu.Lock()
				calls[m.ID]++
				running[m.ID]++
				if running[m.ID] > 1 {
					dup.Add(1)
				}
				if len(calls) == n && calls[m.ID] == 1 {
					close(all)
				}
				mu.Unlock()
				mu.Lock()
				running[m.ID]--
				mu.Unlock()
				return nil
			},
		}, outbox.RelayConfig{Batch: batch, Interval: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rs.relay = relay
		relays = append(relays, rs)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for _, rs := range relays {
		wg.Go(func() {
			if err := rs.relay.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	drainer := relays[0].relay
	wg.Go(func() {
		for ctx.Err() == nil {
			if _, err := drainer.Drain(ctx); err != nil && ctx.Err() == nil {
				t.Error(err)
			}
		}
	})
	for range n / 20 {
		commit(t, runner, store, "mail", 20)
	}
	within(t, all, "every message to be delivered")
	cancel()
	wg.Wait()
	for i, rs := range relays {
		wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
		if err := rs.relay.Wait(wctx); err != nil {
			t.Errorf("relay %d still holds messages after Run returned: %v", i, err)
		}
		wcancel()
		if most := rs.most.Load(); most > 4*batch {
			t.Errorf("relay %d ran %d handlers at once, more than its room of 4×Batch = %d", i, most, 4*batch)
		}
	}
	if dup.Load() != 0 {
		t.Errorf("%d deliveries ran beside another of the same message", dup.Load())
	}
	for id, c := range calls {
		if c != 1 {
			t.Errorf("message %s handled %d times", id, c)
		}
	}
	left, err := store.Claim(t.Context(), time.Now().Add(time.Hour), time.Minute, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d delivered messages were not acknowledged", len(left))
	}
}

// A relay whose clock is in a zone far from UTC and reads nanoseconds
// acknowledges through AckAll's text arrays: each lease's end, formatted
// in UTC to the microsecond, is what Claim wrote. Nothing is left.
func TestAttackAckAllWithAClockInAnotherZone(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := &ackWatch{Outbox: db.Outbox(), failed: make(chan struct{}, 1), all: make(chan struct{}), want: 20}
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
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
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
