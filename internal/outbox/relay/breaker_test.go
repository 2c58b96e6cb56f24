package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// breakerFixture is a relay over two topics, mail and sms, whose handlers
// fail while down is set, on a clock that stands still.
type breakerFixture struct {
	db    *postgres.DB
	store *postgres.Outbox
	relay *relay.Relay
	now   time.Time
	down  atomic.Bool
	seen  map[string]map[uuid.UUID]bool
	mu    sync.Mutex
}

func newBreakerFixture(t *testing.T, db *postgres.DB, cfg outbox.RelayConfig, opts ...relay.Option) *breakerFixture {
	t.Helper()
	f := &breakerFixture{db: db, store: db.Outbox().(*postgres.Outbox), now: epoch, seen: map[string]map[uuid.UUID]bool{}}
	f.down.Store(true)
	handler := func(topic string) outbox.Handler {
		return func(_ context.Context, m outbox.Message) error {
			if f.down.Load() {
				return errors.New("dial tcp: connection refused")
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.seen[topic] == nil {
				f.seen[topic] = map[uuid.UUID]bool{}
			}
			f.seen[topic][m.ID] = true
			return nil
		}
	}
	opts = append([]relay.Option{relay.WithClock(func() time.Time { return f.now })}, opts...)
	rel, err := relay.New(f.store, map[string]outbox.Handler{"mail": handler("mail"), "sms": handler("sms")}, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	f.relay = rel
	return f
}

func (f *breakerFixture) delivered(topic string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen[topic])
}

// drainUntil drains at f.now and then every few seconds of the relay's
// clock for an hour, stopping once want messages of each topic are
// delivered.
func (f *breakerFixture) drainUntil(t *testing.T, want int) {
	t.Helper()
	start := f.now
	for f.now.Sub(start) <= time.Hour {
		if _, err := f.relay.Drain(t.Context()); err != nil {
			t.Fatalf("drain at +%s: %v", f.now.Sub(epoch), err)
		}
		if f.delivered("mail") == want && f.delivered("sms") == want {
			return
		}
		f.now = f.now.Add(3 * time.Second)
	}
}

// TestRelayBreaker checks the circuit breakers that stop claiming a topic whose deliveries all fail.
func TestRelayBreaker(t *testing.T) {
	t.Run("stops a topic whose deliveries all fail", testRelayBreakerStopsATopicWhoseDeliveriesAllFail)
	t.Run("left half-open without a probe when the batch is full", testBreakerLeftHalfOpenWithoutAProbeWhenTheBatchIsFull)
	t.Run("left half-open when the probe's claim fails", testBreakerLeftHalfOpenWhenTheProbeClaimFails)
	t.Run("probes again after a probe that fails for good", testBreakerProbesAgainAfterAProbeThatFailsForGood)
	t.Run("stays open when a late acknowledgement is written", testBreakerStaysOpenWhenALateAckIsWritten)
	t.Run("opens at the first failure to reach the destination", testBreakerOpensAtTheFirstFailureToReachTheDestination)
}

// A failure to reach the destination at all (outbox.ErrUnreachable) opens
// the breaker on its own, though only one message is failing: with the
// seed's defaults, a mail alone in an outage of two and a half minutes is
// tried at the probes' pace and delivered at its seventh attempt once the
// server is back, where its own backoff spent all eight on the outage and
// buried it.
// The same failures from the destination's replies leave the breaker
// closed (testRelayBuriesAMessageThatFailsOnItsOwn).
func testBreakerOpensAtTheFirstFailureToReachTheDestination(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			opt, reader := meter()
			f := newFixtureOn(t, backend, outbox.RelayConfig{}, opt) // MaxAttempts 8
			start := f.now
			var attempts []int
			f.handle = func(_ context.Context, m outbox.Message) error {
				attempts = append(attempts, m.Attempts)
				if f.now.Sub(start) < 150*time.Second {
					refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
					return fmt.Errorf("smtp: send: %w", outbox.Unreachable(refused))
				}
				return nil
			}
			m := f.add(t, "mail")
			f.drain(t)
			if got := collectBy(t, reader, "outbox.breaker.state", "topic")["mail"]; got != 2 {
				t.Errorf("breaker state after one message failed to reach its destination = %v, want 2 (open)", got)
			}
			delivered := 0
			for f.now.Sub(start) < 5*time.Minute && delivered == 0 {
				f.now = f.now.Add(time.Second)
				delivered += f.drain(t).Delivered
			}
			if delivered != 1 {
				rec, err := f.store.Lookup(t.Context(), m.ID)
				t.Fatalf("the mail after an outage of two and a half minutes: %+v, %v; want it delivered", rec, err)
			}
			if want := []int{1, 2, 3, 4, 5, 6, 7}; !slices.Equal(attempts, want) {
				t.Errorf("the handler saw attempts %v, want %v: the first failure, five probes and the delivery", attempts, want)
			}
			if got := collectBy(t, reader, "outbox.breaker.state", "topic")["mail"]; got != 0 {
				t.Errorf("breaker state after the delivery = %v, want 0 (closed)", got)
			}
		})
	}
}

// A probe that fails for good (outbox.ErrPermanent) is buried and says
// nothing of the destination: the breaker neither closes nor opens for
// longer, and the next claim probes with another message.
func testBreakerProbesAgainAfterAProbeThatFailsForGood(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := db.Outbox()
	now := epoch
	clock := func() time.Time { return now }
	var poison uuid.UUID
	rel, err := relay.New(store, map[string]outbox.Handler{
		"mail": func(_ context.Context, m outbox.Message) error {
			if m.ID == poison {
				return fmt.Errorf("payload does not decode: %w", outbox.ErrPermanent)
			}
			return errors.New("dial tcp: connection refused")
		},
	}, outbox.RelayConfig{}, relay.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	drain := func(want relay.DrainStats) {
		t.Helper()
		drainWant(t, rel, now, want)
	}
	commit(t, db.Runner(clock), store, "mail", 3)
	drain(relay.DrainStats{Claimed: 3, Retried: 3}) // The breaker opens.
	// Due before the others' retries, the poison is the first probe.
	poison = addAt(t, db, store, "mail", now).ID
	// Still half-open after it, so the pass probes once more, and that
	// probe fails and opens the breaker again. Had the poison closed the
	// breaker, the pass would claim all three others; had it opened it,
	// none.
	now = epoch.Add(5 * time.Second)
	drain(relay.DrainStats{Claimed: 2, Retried: 1, Buried: 1})
	drain(relay.DrainStats{})
}

// While every delivery of a topic fails, its breaker opens: the relay stops
// claiming its messages, so they spend no attempts, while other topics flow;
// it probes with one message at a time, and the first probe that is
// delivered closes it.
func testRelayBreakerStopsATopicWhoseDeliveriesAllFail(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := db.Outbox()
	now := epoch
	clock := func() time.Time { return now }
	down := true
	var mailCalls int
	opt, reader := meter()
	rel, err := relay.New(store, map[string]outbox.Handler{
		"mail": func(context.Context, outbox.Message) error {
			mailCalls++
			if down {
				return errors.New("dial tcp: connection refused")
			}
			return nil
		},
		"sms": func(context.Context, outbox.Message) error { return nil },
	}, outbox.RelayConfig{}, relay.WithClock(clock), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	add := func(topic string) {
		t.Helper()
		commit(t, db.Runner(clock), store, topic, 1)
	}
	drain := func(want relay.DrainStats) {
		t.Helper()
		drainWant(t, rel, now, want)
	}
	state := func() float64 {
		return collectBy(t, reader, "outbox.breaker.state", "topic")["mail"]
	}
	for range 3 {
		add("mail")
	}
	drain(relay.DrainStats{Claimed: 3, Retried: 3})
	if state() != 2 {
		t.Fatalf("breaker state after three failures of three messages = %v, want 2 (open)", state())
	}
	// Open: mail waits, whatever is due; sms flows.
	add("sms")
	now = now.Add(2 * time.Second)
	drain(relay.DrainStats{Claimed: 1, Delivered: 1})
	// Half-open after five seconds: one probe, which fails and opens the
	// breaker for longer.
	now = epoch.Add(5 * time.Second)
	drain(relay.DrainStats{Claimed: 1, Retried: 1})
	now = epoch.Add(14 * time.Second)
	drain(relay.DrainStats{})
	// The destination is back: the next probe is delivered and closes the
	// breaker, and the rest follows in the same pass.
	down = false
	now = epoch.Add(15 * time.Second)
	drain(relay.DrainStats{Claimed: 3, Delivered: 3})
	if state() != 0 {
		t.Errorf("breaker state after a delivered probe = %v, want 0 (closed)", state())
	}
	if mailCalls != 7 {
		t.Errorf("the mail handler ran %d times, want 7: 3 failures, 2 probes and the 2 others", mailCalls)
	}
}

// Two topics whose breakers open together reach their probe time together,
// and with Batch 1 one claim can probe only one of them. The other stays
// half-open until a later claim probes it: both topics flow again once
// their destinations are back.
func testBreakerLeftHalfOpenWithoutAProbeWhenTheBatchIsFull(t *testing.T) {
	t.Parallel()
	f := newBreakerFixture(t, pgtest.New(t), outbox.RelayConfig{Batch: 1, MaxAttempts: 20})
	for _, topic := range []string{"mail", "sms"} {
		for range 3 {
			addAt(t, f.db, f.store, topic, f.now)
		}
	}
	if stats, err := f.relay.Drain(t.Context()); err != nil || stats.Retried != 6 {
		t.Fatalf("first pass: %+v, %v; want all six failed, both breakers open", stats, err)
	}
	f.down.Store(false) // Both destinations are back.
	f.now = epoch.Add(5 * time.Second)
	f.drainUntil(t, 3)
	if f.delivered("mail") != 3 || f.delivered("sms") != 3 {
		t.Errorf("an hour after both destinations came back: delivered %d mail and %d sms of 3 each; "+
			"the breaker left half-open without a probe never lets its topic through",
			f.delivered("mail"), f.delivered("sms"))
	}
}

// A store error on the probe's claim (the database goes away just then)
// leaves the breaker half-open, waiting for its probe: once the database is
// back, a later claim probes the topic and it flows again. A probe's claim
// that works makes the relay ready again, though every topic's breaker is
// open and the probes are all it claims.
func testBreakerLeftHalfOpenWhenTheProbeClaimFails(t *testing.T) {
	t.Parallel()
	db, proxy := pgtest.NewBehindProxy(t)
	f := newBreakerFixture(t, db, outbox.RelayConfig{MaxAttempts: 20})
	for range 3 {
		addAt(t, f.db, f.store, "mail", f.now)
	}
	for range 3 {
		addAt(t, f.db, f.store, "sms", f.now)
	}
	if stats, err := f.relay.Drain(t.Context()); err != nil || stats.Retried != 6 {
		t.Fatalf("first pass: %+v, %v; want all six failed, both breakers open", stats, err)
	}
	f.now = epoch.Add(5 * time.Second) // Both breakers are due to probe.
	proxy.Down()
	if _, err := f.relay.Drain(t.Context()); err == nil {
		t.Fatal("a drain with the database away succeeded")
	}
	if err := f.relay.Ready(); !errors.Is(err, relay.ErrCannotClaim) {
		t.Fatalf("Ready after the probe's claim failed = %v, want ErrCannotClaim", err)
	}
	proxy.Up()
	f.now = f.now.Add(time.Second)
	if stats, err := f.relay.Drain(t.Context()); err != nil || stats != (relay.DrainStats{Claimed: 2, Retried: 2}) {
		t.Fatalf("the pass once the database is back: %+v, %v; want the two probes alone, failed", stats, err)
	}
	if err := f.relay.Ready(); err != nil {
		t.Errorf("Ready once the probes' claims worked = %v, want nil", err)
	}
	f.down.Store(false)
	f.drainUntil(t, 3)
	if f.delivered("mail") != 3 || f.delivered("sms") != 3 {
		t.Errorf("an hour after the database and both destinations came back: delivered %d mail and %d sms of 3 each",
			f.delivered("mail"), f.delivered("sms"))
	}
}

// drainWant runs one pass of relay, whose clock reads now, and fails t
// unless it gives want.
func drainWant(t *testing.T, rel *relay.Relay, now time.Time, want relay.DrainStats) {
	t.Helper()
	got, err := rel.Drain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("drain at +%s: %+v, want %+v", now.Sub(epoch), got, want)
	}
}

// A success whose acknowledgement waits is told to the breaker when its
// handler returns: failures that open the breaker while the
// acknowledgement waits keep it open once it is written.
func testBreakerStaysOpenWhenALateAckIsWritten(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := &ackSizes{Outbox: db.Outbox().(*postgres.Outbox), sizes: make(chan int, 100)}
	var down atomic.Bool
	handled := make(chan struct{}, 100)
	var logMu sync.Mutex
	var logs strings.Builder
	logged := func(what string) bool {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Contains(logs.String(), what)
	}
	rel, err := relay.New(store, map[string]outbox.Handler{
		"mail": func(context.Context, outbox.Message) error {
			defer func() { handled <- struct{}{} }()
			if down.Load() {
				return errors.New("dial tcp: connection refused")
			}
			return nil
		},
		"sms": func(context.Context, outbox.Message) error { return nil },
	}, outbox.RelayConfig{Batch: 10, Interval: time.Hour, Lease: 2 * time.Hour},
		relay.WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	relay.SetAckDelay(rel, time.Hour)
	cancel, done := runRelay(t, rel)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	addNow(t, db, store.Outbox)
	within(t, handled, "the delivery")
	down.Store(true)
	commit(t, db.Runner(nil), store.Outbox, "mail", 3)
	for i := range 3 {
		within(t, handled, fmt.Sprintf("failure %d", i+1))
	}
	for deadline := time.Now().Add(30 * time.Second); !logged("circuit open"); {
		if time.Now().After(deadline) {
			t.Fatalf("the breaker did not open after three failures; logs:\n%s", logs.String())
		}
		time.Sleep(time.Millisecond)
	}
	// A keyed message's acknowledgement is written at once, with the one
	// that waited.
	err = db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		m, err := outbox.NewMessage("sms", map[string]string{"to": "a"}, tx.Now())
		if err != nil {
			return err
		}
		m.Key = "k"
		return store.Add(ctx, tx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := nextSize(t, store.sizes, "the acknowledgements"); n != 2 {
		t.Errorf("AckAll acknowledged %d messages, want the waiting one with the keyed one", n)
	}
	if logged("circuit closed") {
		t.Errorf("the late acknowledgement closed the breaker that the failures opened; logs:\n%s", logs.String())
	}
}
