package relay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// cancelOnClaim is a store whose first claim that takes messages ends the
// relay's run as it returns, and drops its answer when its context has
// ended then, as a driver whose context ends while it reads the answer
// does: the messages are leased in the database all the same.
type cancelOnClaim struct {
	outbox.RelayStore
	cancel context.CancelFunc
	once   sync.Once
}

func (s *cancelOnClaim) ClaimWithOrigins(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]outbox.Claimed, error) {
	msgs, err := s.RelayStore.ClaimWithOrigins(ctx, now, lease, limit)
	if len(msgs) > 0 {
		s.once.Do(s.cancel)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return msgs, err
}

// TestRelayStop checks what Run does once its context ends: deliveries in flight finish or, past the grace, are released, and nothing claimed is lost.
func TestRelayStop(t *testing.T) {
	t.Run("finishes the delivery in flight", testRelayFinishesDeliveryInFlightOnShutdown)
	t.Run("past its grace releases what is in flight", testRelayStopPastItsGraceReleasesWhatIsInFlight)
	t.Run("during a claim releases what it took", testRelayStopDuringAClaimReleasesWhatItTook)
	t.Run("while the acknowledgements are written", testStopWhileTheAckerFlushes)
	t.Run("returns within its grace with every topic in flight", testRelayStopReturnsWithinItsGrace)
}

// Run returns within its stop's grace once its context ends, while the
// handlers of several topics are still running and more messages are
// claimed than handed out: every topic's channel is closed, and nothing
// waits on a channel nobody reads.
func testRelayStopReturnsWithinItsGrace(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := db.Outbox()
	started := make(chan struct{}, 100)
	block := func(ctx context.Context, m outbox.Message) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	rel, err := relay.New(store, map[string]outbox.Handler{"mail": block, "sms": block, "push": block},
		outbox.RelayConfig{Timeout: time.Hour, Lease: 2 * time.Hour, Batch: 2}, relay.WithStopGrace(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	for _, topic := range []string{"mail", "sms", "push"} {
		for range 5 {
			addAt(t, db, store, topic, time.Now())
		}
	}
	cancel, done := runRelay(t, rel)
	for range 3 {
		<-started
	}
	cancel()
	stopped := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its stop; its grace is 100ms")
	}
	if took := time.Since(stopped); took > 100*time.Millisecond+outbox.SettleTimeout {
		t.Errorf("Run returned %s after its stop, more than its grace and SettleTimeout", took)
	}
	if err := rel.Wait(t.Context()); err != nil {
		t.Errorf("messages still held after Run returned: %v", err)
	}
}

// Stopping a relay lets the delivery in flight finish and acknowledges it.
func testRelayFinishesDeliveryInFlightOnShutdown(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := db.Outbox()
	started, release := make(chan struct{}), make(chan struct{})
	rel, err := relay.New(store, map[string]outbox.Handler{
		"mail": func(ctx context.Context, m outbox.Message) error {
			close(started)
			<-release
			return ctx.Err()
		},
	}, outbox.RelayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	addNow(t, db, store)
	cancel, done := runRelay(t, rel)
	<-started
	cancel()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	left, err := store.Claim(t.Context(), time.Now().Add(time.Hour), time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the delivery finished during shutdown was not acknowledged")
	}
}

// A stop whose grace runs out cuts the deliveries in flight short and
// releases their messages: due again at once, their attempts given back,
// nothing buried, and Run returns within the grace, not the timeout.
func testRelayStopPastItsGraceReleasesWhatIsInFlight(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			// The relay's clock stands still at epoch: a release makes a
			// message due at epoch, a retry at epoch plus its backoff.
			f := newFixtureOn(t, backend, outbox.RelayConfig{Timeout: time.Hour, Lease: 2 * time.Hour, MaxAttempts: 3},
				relay.WithStopGrace(50*time.Millisecond))
			const n = 3
			started := make(chan uuid.UUID, n)
			f.handle = func(ctx context.Context, m outbox.Message) error {
				started <- m.ID
				<-ctx.Done()
				return ctx.Err()
			}
			var msgs []outbox.Message
			for range n {
				msgs = append(msgs, f.add(t, "mail"))
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- f.relay.Run(ctx) }()
			for range n {
				<-started
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Minute):
				t.Fatal("Run did not return within a minute of its stop; the handlers' timeout is an hour")
			}
			for _, m := range msgs {
				rec, err := f.store.Lookup(t.Context(), m.ID)
				if err != nil {
					t.Fatal(err)
				}
				if rec.Attempts != 0 || !rec.BuriedAt.IsZero() || rec.DueAt.After(epoch) {
					t.Errorf("message %s after the stop: attempts %d, buried at %v, due at %v; want attempts 0, not buried, due at once (%v)",
						m.ID, rec.Attempts, rec.BuriedAt, rec.DueAt, epoch)
				}
			}
		})
	}
}

// A stop that comes while a claim is under way lets the claim finish and
// releases what it took: nothing stays leased with an attempt spent.
func testRelayStopDuringAClaimReleasesWhatItTook(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixtureOn(t, backend, outbox.RelayConfig{MaxAttempts: 3})
			var msgs []outbox.Message
			for range 3 {
				msgs = append(msgs, f.add(t, "mail"))
			}
			ctx, cancel := context.WithCancel(t.Context())
			store := &cancelOnClaim{RelayStore: f.store, cancel: cancel}
			delivered := make(chan uuid.UUID, len(msgs))
			rel, err := relay.New(store, map[string]outbox.Handler{
				"mail": func(_ context.Context, m outbox.Message) error { delivered <- m.ID; return nil },
			}, outbox.RelayConfig{MaxAttempts: 3}, relay.WithClock(func() time.Time { return f.now }))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rel.Close() })
			if err := rel.Run(ctx); err != nil {
				t.Fatal(err)
			}
			close(delivered)
			gone := map[uuid.UUID]bool{}
			for id := range delivered {
				gone[id] = true
			}
			for _, m := range msgs {
				if gone[m.ID] {
					continue
				}
				rec, err := f.store.Lookup(t.Context(), m.ID)
				if err != nil {
					t.Fatal(err)
				}
				if rec.Attempts != 0 || rec.DueAt.After(f.now) {
					t.Errorf("message %s after a stop during its claim: attempts %d, due at %v; want attempts 0, due at once (%v)",
						m.ID, rec.Attempts, rec.DueAt, f.now)
				}
			}
		})
	}
}

// Shutdown while the acker is retrying against a database that is away:
// Run waits for the acker, which writes the acknowledgements once the
// database is back.
func testStopWhileTheAckerFlushes(t *testing.T) { runFlap(t, true) }
