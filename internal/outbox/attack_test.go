package outbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// addAt commits one message for topic to store, created at now.
func addAt(t *testing.T, db *postgres.DB, store outbox.Store, topic string, now time.Time) outbox.Message {
	t.Helper()
	m, err := outbox.NewMessage(topic, "hi", now)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Runner(func() time.Time { return now }).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		return store.Add(ctx, tx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The tightest lease Validate accepts, Timeout+SettleTimeout, is "a valid
// config", and Drain promises that it "leaves the first [delivery] that
// much". On the real clock it does not: time passes between the claim's now
// and the check before the first delivery, so the lease has a little less
// than Timeout+SettleTimeout left, and every message is released untried.
// Each pass spends one attempt of each message and delivers nothing.
func TestAttackDrainWithTheTightestValidLeaseDelivers(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := db.Outbox()
	cfg := outbox.RelayConfig{Timeout: 30 * time.Second, Lease: 30*time.Second + outbox.SettleTimeout}
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Fatalf("the config under test is not valid: %v", err)
	}
	var calls atomic.Int32
	relay, err := outbox.NewRelay(store, map[string]outbox.Handler{
		"mail": func(context.Context, outbox.Message) error { calls.Add(1); return nil },
	}, cfg) // The real clock, as `app outbox drain` runs it.
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	m := addAt(t, db, store, "mail", time.Now())
	var last outbox.DrainStats
	for range 3 {
		if last, err = relay.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if calls.Load() > 0 {
			break
		}
	}
	if calls.Load() != 1 {
		rec, _ := store.Lookup(t.Context(), m.ID)
		t.Errorf("three passes with Lease = Timeout+SettleTimeout never ran the handler (last pass %+v); "+
			"the message has spent %d attempts untried, last error %q", last, rec.Attempts, rec.LastError)
	}
}

// A message that the relay claims and releases untried (a drain stopped
// after its first delivery, a relay shut down while handing a batch over)
// keeps the attempt its claim counted. After MaxAttempts such releases it is
// buried as "claimed more often than allowed without finishing" although
// its handler never ran: nothing crashed on it, and "shutdown loses
// nothing" does not hold for it.
func TestAttackReleasedMessagesAreNotBuriedUntried(t *testing.T) {
	f := newFixture(t) // MaxAttempts 3
	var mu sync.Mutex
	seen := map[uuid.UUID]int{}
	var stop context.CancelFunc
	f.handle = func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		seen[m.ID]++
		mu.Unlock()
		if stop != nil {
			stop() // An operator presses Ctrl-C during the first delivery.
		}
		return nil
	}
	var msgs []outbox.Message
	for range 4 {
		msgs = append(msgs, f.add(t, "mail"))
	}
	for range 3 {
		ctx, cancel := context.WithCancel(t.Context())
		stop = cancel
		if _, err := f.relay.Drain(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted drain: %v", err)
		}
		cancel()
	}
	stop = nil
	stats := f.drain(t)
	last := msgs[3]
	if seen[last.ID] != 1 || stats.Buried != 0 {
		rec, _ := f.store.Lookup(t.Context(), last.ID)
		t.Errorf("after three interrupted drains, the last pass %+v; handler ran %d times for %s, which is now %+v: "+
			"a message buried without ever being handed to its handler", stats, seen[last.ID], last.ID, rec)
	}
}

// breakerFixture is a relay over two topics, mail and sms, whose handlers
// fail while down is set, on a clock that stands still.
type breakerFixture struct {
	db    *postgres.DB
	store *postgres.Outbox
	relay *outbox.Relay
	now   time.Time
	down  atomic.Bool
	seen  map[string]map[uuid.UUID]bool
	mu    sync.Mutex
}

func newBreakerFixture(t *testing.T, db *postgres.DB, cfg outbox.RelayConfig, opts ...outbox.RelayOption) *breakerFixture {
	t.Helper()
	f := &breakerFixture{db: db, store: db.Outbox(), now: epoch, seen: map[string]map[uuid.UUID]bool{}}
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
	opts = append([]outbox.RelayOption{outbox.WithClock(func() time.Time { return f.now })}, opts...)
	relay, err := outbox.NewRelay(f.store, map[string]outbox.Handler{"mail": handler("mail"), "sms": handler("sms")}, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Close() })
	f.relay = relay
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

// Two topics whose breakers open together reach their probe time together.
// claim() asks plan() for both probes (plan marks both half-open), then
// stops probing once the batch is full: with Batch 1 the second topic is
// left half-open with no probe. plan() only reopens a half-open breaker
// whose probe is set, and only probes an open one, so that topic is
// excluded from every claim for ever, although its destination is back.
func TestAttackBreakerLeftHalfOpenWithoutAProbeWhenTheBatchIsFull(t *testing.T) {
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
// leaves the breaker half-open with no probe: plan() marked it half-open and
// claim() returned before probing() recorded anything. The topic is then
// never claimed again, by that relay, once the database is back.
func TestAttackBreakerLeftHalfOpenWhenTheProbeClaimFails(t *testing.T) {
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
	f.down.Store(false)
	f.now = epoch.Add(5 * time.Second) // Both breakers are due to probe.
	proxy.Down()
	if _, err := f.relay.Drain(t.Context()); err == nil {
		t.Fatal("a drain with the database away succeeded")
	}
	proxy.Up()
	f.now = f.now.Add(time.Second)
	f.drainUntil(t, 3)
	if f.delivered("mail") != 3 || f.delivered("sms") != 3 {
		t.Errorf("an hour after the database and both destinations came back: delivered %d mail and %d sms of 3 each",
			f.delivered("mail"), f.delivered("sms"))
	}
}

// outbox.overran and outbox.lease_lost are the counters an operator alerts
// on for guarantee 1 and 2, but unlike delivered, retried and buried they do
// not exist at 0 from the first scrape, so an alert on their increase
// misses the first overrun after a restart.
func TestAttackEveryTopicCounterExistsAtZeroFromTheStart(t *testing.T) {
	opt, reader := meter()
	newFixture(t, opt)
	got := collect(t, reader)
	for _, name := range []string{"outbox.overran", "outbox.lease_lost"} {
		if v, ok := got[name]["mail"]; !ok || v != 0 {
			t.Errorf("%s{topic=mail} = %v (present %t), want 0 from the first scrape", name, v, ok)
		}
	}
}
