package relay_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestRelayFencing checks that leases fence deliveries: no message runs twice at once while its lease holds, and a relay whose claim ended changes nothing.
func TestRelayFencing(t *testing.T) {
	t.Run("never runs a message twice at once while its lease holds", testRelayNeverRunsAMessageTwiceAtOnceWhileItsLeaseHolds)
	t.Run("a relay whose claim ended changes nothing whatever its clock", testRelayWhoseClaimEndedChangesNothingWhateverItsClock)
	t.Run("reports a handler that outlives its lease", testRelayReportsAHandlerThatOutlivesItsLease)
	t.Run("relays on one database never deliver a message twice", testRelaysOnOneDatabaseNeverDeliverAMessageTwice)
	t.Run("run and drain on one relay beside other relays", testRunAndDrainOnOneRelayBesideOtherRelays)
}

// A handler that ignores its context is not run again while it runs: its
// context ends at the timeout, the pass goes on without it, and its message
// stays leased until the handler returns, whose failure is then recorded.
func testRelayNeverRunsAMessageTwiceAtOnceWhileItsLeaseHolds(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { testNeverTwiceAtOnce(t, b) })
	}
}

// Two relays whose clocks disagree by several seconds: the one ahead claims
// a message while the one behind, by its own clock, still holds it. The one
// behind then fails its delivery, and its failure changes nothing of the
// other's claim, which delivers and acknowledges the message.
func testRelayWhoseClaimEndedChangesNothingWhateverItsClock(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { testClaimEndedWhateverClock(t, b) })
	}
}

// A handler still running when its message's lease ends is counted and
// logged with the message's ID; the message is then due again, and the
// handler's late outcome changes nothing of the claim that followed.
func testRelayReportsAHandlerThatOutlivesItsLease(t *testing.T) {
	opt, reader := meter()
	var logs strings.Builder
	var logMu sync.Mutex
	f := newFixtureWith(t, outbox.RelayConfig{Timeout: 50 * time.Millisecond, MaxAttempts: 5}, opt,
		relay.WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))))
	hung := make(chan struct{})
	var calls atomic.Int32
	f.handle = func(ctx context.Context, _ outbox.Message) error {
		if calls.Add(1) == 1 {
			<-hung
			return errors.New("421 late")
		}
		return nil
	}
	m := f.add(t, "mail")
	if got := f.drain(t); got.Running != 1 {
		t.Fatalf("first pass: %+v, want the delivery left running", got)
	}
	f.now = f.now.Add(outbox.DefaultLease)
	if got := f.drain(t); got.Claimed != 1 || got.Delivered != 1 {
		t.Fatalf("after the lease ended: %+v, want the message claimed again and delivered", got)
	}
	if got := collect(t, reader)["outbox.overran"]["mail"]; got != 1 {
		t.Errorf("outbox.overran = %v, want 1", got)
	}
	logMu.Lock()
	logged := logs.String()
	logMu.Unlock()
	if !strings.Contains(logged, "still running when its lease ended") || !strings.Contains(logged, m.ID.String()) {
		t.Errorf("log does not report the overrun with the message ID:\n%s", logged)
	}
	close(hung)
	if err := f.relay.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Lookup(t.Context(), m.ID); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("the late failure brought the delivered message back: %v", err)
	}
	if got := collect(t, reader)["outbox.lease_lost"]["mail"]; got != 1 {
		t.Errorf("outbox.lease_lost = %v, want the late failure counted", got)
	}
}

func testRelaysOnOneDatabaseNeverDeliverAMessageTwice(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store, runner := db.Outbox(), db.Runner(nil)
	const n = 600
	rec := newRecorder(n)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 3 {
		rel, err := relay.New(store, map[string]outbox.Handler{"mail": rec.handle},
			outbox.RelayConfig{Batch: 7, Interval: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := rel.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	for range n / 50 {
		commit(t, runner, store, "mail", 50)
	}
	rec.wait(t)
	cancel()
	wg.Wait()
	for id, c := range rec.count {
		if c != 1 {
			t.Errorf("message %s delivered %d times", id, c)
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

// Three relays run on one database; on one of them Drain runs beside Run,
// again and again, sharing its semaphore and breakers. No message is handled
// twice or by two goroutines at once, none is left, no relay ever has more
// than the HeldBatches×Batch handlers running that its semaphore allows (Drain shares it),
// and each relay ends with nothing held.
func testRunAndDrainOnOneRelayBesideOtherRelays(t *testing.T) {
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
		relay      *relay.Relay
		busy, most atomic.Int32
	}
	var relays []*relayState
	for range 3 {
		rs := &relayState{}
		rel, err := relay.New(store, map[string]outbox.Handler{
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
		rs.relay = rel
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
		if most := rs.most.Load(); most > relay.HeldBatches*batch {
			t.Errorf("relay %d ran %d handlers at once, more than its semaphore's HeldBatches×Batch = %d", i, most, relay.HeldBatches*batch)
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

func testNeverTwiceAtOnce(t *testing.T, backend string) {
	f := newFixtureOn(t, backend, outbox.RelayConfig{Timeout: 50 * time.Millisecond, MaxAttempts: 3})
	hung, cancelled := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	running, most, calls := 0, 0, 0
	f.handle = func(ctx context.Context, _ outbox.Message) error {
		mu.Lock()
		running++
		calls++
		most = max(most, running)
		first := calls == 1
		mu.Unlock()
		defer func() {
			mu.Lock()
			running--
			mu.Unlock()
		}()
		if first {
			<-ctx.Done()
			close(cancelled)
			<-hung // Ignores its context after that.
			return ctx.Err()
		}
		return nil
	}
	m := f.add(t, "mail")
	if got := f.drain(t); got.Running != 1 || got.Delivered != 0 {
		t.Fatalf("first pass: %+v, want the hung delivery left running", got)
	}
	<-cancelled
	// The old relay retried one second later, beside the hung call.
	for _, d := range []time.Duration{outbox.Backoff(1), time.Minute} {
		f.now = epoch.Add(d)
		if got := f.drain(t); got.Claimed != 0 {
			t.Fatalf("%s after the claim, while its handler still runs: %+v, want nothing claimed", d, got)
		}
	}
	close(hung)
	if err := f.relay.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec, err := f.store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rec.LastError, "deadline exceeded") || !rec.DueAt.Equal(f.now.Add(outbox.Backoff(1))) {
		t.Errorf("after the hung handler returned: last error %q, due %v; want its timeout recorded and a retry after Backoff(1)",
			rec.LastError, rec.DueAt)
	}
	f.now = rec.DueAt
	if got := f.drain(t); got.Delivered != 1 {
		t.Errorf("retry: %+v, want delivered", got)
	}
	if most != 1 || calls != 2 {
		t.Errorf("handler ran %d times, at most %d at once; want twice, one at a time", calls, most)
	}
}

func testClaimEndedWhateverClock(t *testing.T, backend string) {
	f := newFixtureOn(t, backend, outbox.RelayConfig{MaxAttempts: 3})
	aheadNow := f.now.Add(outbox.DefaultLease - 3*time.Second + 7*time.Second)
	aheadRunning, proceed := make(chan struct{}), make(chan struct{})
	ahead, err := relay.New(f.store, map[string]outbox.Handler{
		"mail": func(context.Context, outbox.Message) error {
			close(aheadRunning)
			<-proceed
			return nil
		},
	}, outbox.RelayConfig{}, relay.WithClock(func() time.Time { return aheadNow }))
	if err != nil {
		t.Fatal(err)
	}
	aheadDone := make(chan relay.DrainStats, 1)
	f.handle = func(context.Context, outbox.Message) error {
		// 3s before this relay's lease ends by its clock, the other finds
		// it ended by its own and delivers the message too.
		go func() {
			stats, err := ahead.Drain(context.Background())
			if err != nil {
				t.Error(err)
			}
			aheadDone <- stats
		}()
		<-aheadRunning
		return errors.New("421 too slow")
	}
	m := f.add(t, "mail")
	if stats := f.drain(t); stats.Retried != 0 {
		t.Errorf("the relay behind recorded its failure: %+v", stats)
	}
	rec, err := f.store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LastError != "" || !rec.DueAt.Equal(aheadNow.Add(outbox.DefaultLease)) || rec.Attempts != 2 {
		t.Errorf("while the relay ahead delivers: %+v; want its claim untouched", rec)
	}
	close(proceed)
	if stats := <-aheadDone; stats.Delivered != 1 {
		t.Errorf("the relay ahead: %+v, want the message delivered", stats)
	}
	if _, err := f.store.Lookup(t.Context(), m.ID); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("after the relay ahead delivered: %v, want the message acknowledged", err)
	}
}
