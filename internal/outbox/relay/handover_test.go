package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
)

// handoverFixture is a relay that runs on a fresh database, on a clock that
// stands still until the test moves it, with one handler for topic "mail"
// that calls handle and then reports the delivery on delivered.
type handoverFixture struct {
	store     fixtureStore
	runner    uow.Runner
	relay     *relay.Relay
	clock     *testclock.Clock
	reader    *sdkmetric.ManualReader
	cfg       outbox.RelayConfig
	handle    func(context.Context, outbox.Message) error
	delivered chan outbox.Message
	// log is the database's event log, on SQLite only: its transactions
	// run no hooks.
	log projections.Log
	// stop ends the run and waits for Run to return.
	stop func()
}

// newHandoverFixture returns a relay with cfg on backend, not yet running,
// on the backend's store or, when wrap is given, on what it makes of it.
// Its poll interval is an hour unless cfg says otherwise, so that it
// claims only at start and when woken.
func newHandoverFixture(t *testing.T, backend string, cfg outbox.RelayConfig, wrap ...func(fixtureStore) fixtureStore) *handoverFixture {
	t.Helper()
	f := &handoverFixture{clock: testclock.New(epoch), delivered: make(chan outbox.Message, 100)}
	f.handle = func(context.Context, outbox.Message) error { return nil }
	switch backend {
	case "postgres":
		db := pgtest.New(t)
		f.store, f.runner = db.Outbox(), db.Runner(f.clock.Now)
	case "sqlite":
		db := sqlitetest.New(t)
		f.store, f.runner, f.log = db.Outbox(), db.Runner(f.clock.Now), db.Log(sqlite.LogConfig{})
	}
	for _, w := range wrap {
		f.store = w(f.store)
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Hour
	}
	f.cfg = cfg.WithDefaults()
	opt, reader := meter()
	f.reader = reader
	rel, err := relay.New(f.store, map[string]outbox.Handler{
		"mail": func(ctx context.Context, m outbox.Message) error {
			err := f.handle(ctx, m)
			if err == nil {
				f.delivered <- m
			}
			return err
		},
	}, cfg, relay.WithClock(f.clock.Now), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	f.relay = rel
	return f
}

// start runs the relay until f.stop is called or the test ends.
func (f *handoverFixture) start(t *testing.T) {
	t.Helper()
	cancel, done := runRelay(t, f.relay)
	stopped := false
	f.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(f.stop)
}

// running returns a fixture as newHandoverFixture does, its relay started,
// taking what its process commits, and holding nothing.
func running(t *testing.T, backend string, cfg outbox.RelayConfig) *handoverFixture {
	t.Helper()
	f := newHandoverFixture(t, backend, cfg)
	f.start(t)
	f.untilTaking(t)
	f.idle(t)
	return f
}

// message returns a message for topic, created at the clock's time.
func (f *handoverFixture) message(t *testing.T, topic string) outbox.Message {
	t.Helper()
	m, err := outbox.NewMessage(topic, map[string]string{"to": "ada@example.com"}, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// add commits msgs in one unit of work.
func (f *handoverFixture) add(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	if err := f.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		return f.store.Add(ctx, tx, msgs...)
	}); err != nil {
		t.Fatal(err)
	}
}

// next returns the next message delivered.
func (f *handoverFixture) next(t *testing.T) outbox.Message {
	t.Helper()
	select {
	case m := <-f.delivered:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery within 30s")
		return outbox.Message{}
	}
}

// taken returns how many messages the relay took from the handover.
func (f *handoverFixture) taken(t *testing.T) float64 {
	t.Helper()
	return collect(t, f.reader)["outbox.taken"]["mail"]
}

// untilTaking adds messages one at a time, each once the last was
// delivered, until the relay takes one: from then on it has found the
// store drained and takes what its process commits.
func (f *handoverFixture) untilTaking(t *testing.T) {
	t.Helper()
	for range 100 {
		f.add(t, f.message(t, "mail"))
		f.next(t)
		if f.taken(t) > 0 {
			return
		}
	}
	t.Fatal("the relay took none of 100 messages committed one by one")
}

// idle fails t unless every slot of the relay is free within a bound.
func (f *handoverFixture) idle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := f.relay.Wait(ctx); err != nil {
		t.Fatalf("the relay still holds messages: %v", err)
	}
}

// stored returns the store's record of m.
func (f *handoverFixture) stored(t *testing.T, m outbox.Message) outbox.Record {
	t.Helper()
	rec, err := f.store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// addLeft commits a message and checks that the relay left it to its
// claims, as it must when: it is stored due, no attempt counted.
func (f *handoverFixture) addLeft(t *testing.T, when string) outbox.Message {
	t.Helper()
	m := f.message(t, "mail")
	f.add(t, m)
	rec, err := f.store.Lookup(t.Context(), m.ID)
	switch {
	case errors.Is(err, outbox.ErrNotFound):
		t.Errorf("a message committed %s was taken, and already delivered", when)
	case err != nil:
		t.Fatal(err)
	case rec.Attempts != 0:
		t.Errorf("a message committed %s was taken: %d attempts, want 0", when, rec.Attempts)
	}
	return m
}

// gone fails t unless the store no longer holds m.
func (f *handoverFixture) gone(t *testing.T, m outbox.Message) {
	t.Helper()
	if rec, err := f.store.Lookup(t.Context(), m.ID); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("message %s: %+v, %v; want it acknowledged", m.ID, rec, err)
	}
}

// TestRelayHandover checks the messages that a running relay takes from
// the units of work of its process ([outbox.Handover]): what it takes,
// what it leaves to its claims, and what becomes of them when the unit of
// work rolls back, the relay stops, or its process dies.
func TestRelayHandover(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			for _, c := range []struct {
				name string
				test func(*testing.T, string)
			}{
				{"DeliversWhatItTookAsClaimed", testHandoverDeliversWhatItTookAsClaimed},
				{"TakesUnderTheTightestLease", testHandoverTakesUnderTheTightestLease},
				{"GivesTheSlotsOfARollbackBack", testHandoverGivesTheSlotsOfARollbackBack},
				{"ReleasesWhatItTookWhenItStopsBeforeTheCommit", testHandoverReleasesWhenTheRelayStopsBeforeTheCommit},
				{"ShortensTheHandlersTimeOfALateCommit", testHandoverShortensTheHandlersTimeOfALateCommit},
				{"ReleasesWhatALateCommitLeftNoTime", testHandoverReleasesWhatALateCommitLeftNoTime},
				{"LeavesAMessageLeasedWhenItsProcessDies", testHandoverLeavesAMessageLeasedWhenItsProcessDies},
				{"ClaimsKeyedMessages", testHandoverClaimsKeyedMessages},
				{"WakesForWhatItLeaves", testHandoverWakesForWhatItLeaves},
				{"LeavesABatchOfSlotsToTheClaims", testHandoverLeavesABatchOfSlotsToTheClaims},
				{"ClaimsWhileABacklogDrains", testHandoverClaimsWhileABacklogDrains},
				{"ClaimsWhileTheBreakerIsOpen", testHandoverClaimsWhileTheBreakerIsOpen},
			} {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.test(t, b)
				})
			}
		})
	}
	// Every PostgreSQL transaction that may add messages runs its hooks;
	// SQLite's log has transactions that run none.
	t.Run("SQLiteLogTakesNothing", func(t *testing.T) {
		t.Parallel()
		testHandoverTakesNothingFromTransactionsWithoutHooks(t)
	})
}

// A message taken is stored as its claim would leave it, first attempt
// counted and due again at the lease's end, and delivered once committed.
func testHandoverDeliversWhatItTookAsClaimed(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{})
	before := f.taken(t)
	type seen struct {
		rec outbox.Record
		err error
	}
	stored := make(chan seen, 1)
	f.handle = func(ctx context.Context, m outbox.Message) error {
		rec, err := f.store.Lookup(ctx, m.ID)
		stored <- seen{rec, err}
		return nil
	}
	m := f.message(t, "mail")
	f.add(t, m)
	got := f.next(t)
	if got.ID != m.ID || got.Attempts != 1 {
		t.Fatalf("delivered %s at attempt %d, want %s at attempt 1", got.ID, got.Attempts, m.ID)
	}
	s := <-stored
	if s.err != nil {
		t.Fatal(s.err)
	}
	if want := epoch.Add(f.cfg.Lease); s.rec.Attempts != 1 || !s.rec.DueAt.Equal(want) {
		t.Errorf("during its delivery the message was stored with %d attempts, due %v; want 1, due at the lease's end %v",
			s.rec.Attempts, s.rec.DueAt, want)
	}
	if n := f.taken(t); n != before+1 {
		t.Errorf("outbox.taken went from %v to %v, want one more", before, n)
	}
	f.idle(t)
	f.gone(t, m)
}

// A unit of work that rolls back, or whose Add fails, gives the relay the
// slots it took.
func testHandoverGivesTheSlotsOfARollbackBack(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{})
	before := f.taken(t)
	rolledBack := f.message(t, "mail")
	boom := errors.New("boom")
	err := f.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := f.store.Add(ctx, tx, rolledBack); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want %v", err, boom)
	}
	// The second Add of one message fails, at once on SQLite, at the
	// commit on PostgreSQL. A unit of work that ignores its error commits
	// on SQLite, and the message is delivered once.
	twice := f.message(t, "mail")
	err = f.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := f.store.Add(ctx, tx, twice); err != nil {
			return err
		}
		_ = f.store.Add(ctx, tx, twice)
		return nil
	})
	if err == nil {
		if got := f.next(t); got.ID != twice.ID {
			t.Errorf("delivered %s, want %s", got.ID, twice.ID)
		}
	}
	f.idle(t)
	f.gone(t, rolledBack)
	f.gone(t, twice)
	select {
	case m := <-f.delivered:
		t.Errorf("delivered %s, which no unit of work committed once", m.ID)
	default:
	}
	if n := f.taken(t); n > before+1 {
		t.Errorf("outbox.taken went from %v to %v, want at most the message committed", before, n)
	}
}

// A message taken by a relay that stops before the unit of work commits is
// released: due at once, its attempt given back; a later pass delivers it.
func testHandoverReleasesWhenTheRelayStopsBeforeTheCommit(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{})
	before := f.taken(t)
	m := f.message(t, "mail")
	err := f.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := f.store.Add(ctx, tx, m); err != nil {
			return err
		}
		f.stop()
		f.clock.Advance(time.Minute)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.idle(t)
	if rec, want := f.stored(t, m), epoch.Add(time.Minute); rec.Attempts != 0 || !rec.DueAt.Equal(want) {
		t.Errorf("after the commit the message has %d attempts, due %v; want 0, due at the commit (%v)", rec.Attempts, rec.DueAt, want)
	}
	if n := f.taken(t); n != before {
		t.Errorf("outbox.taken went from %v to %v, want no more", before, n)
	}
	stats, err := f.relay.Drain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Delivered != 1 || f.next(t).Attempts != 1 {
		t.Errorf("Drain: %+v, want the message delivered at its first attempt", stats)
	}
}

// A unit of work that commits late leaves its handlers what the lease
// leaves them, once the time to record their outcome is kept.
func testHandoverShortensTheHandlersTimeOfALateCommit(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{})
	before := f.taken(t)
	const late = 10 * time.Second
	left := make(chan time.Duration, 1)
	f.handle = func(ctx context.Context, _ outbox.Message) error {
		deadline, _ := ctx.Deadline()
		left <- time.Until(deadline)
		return nil
	}
	m := f.message(t, "mail")
	err := f.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := f.store.Add(ctx, tx, m); err != nil {
			return err
		}
		f.clock.Advance(f.cfg.Lease - f.cfg.Timeout - outbox.SettleTimeout + late)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.next(t); got.ID != m.ID {
		t.Fatalf("delivered %s, want %s", got.ID, m.ID)
	}
	if d, most := <-left, f.cfg.Timeout-late; d > most {
		t.Errorf("the handler had %s, want at most the %s that the lease leaves it", d, most)
	}
	if n := f.taken(t); n != before+1 {
		t.Errorf("outbox.taken went from %v to %v, want one more", before, n)
	}
}

// A unit of work that commits so late that the lease of what it added
// leaves nothing but the time to record an outcome gets its messages
// released, and the relay, woken for them, claims them.
func testHandoverReleasesWhatALateCommitLeftNoTime(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{})
	before := f.taken(t)
	m := f.message(t, "mail")
	late := f.cfg.Lease - outbox.SettleTimeout
	err := f.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := f.store.Add(ctx, tx, m); err != nil {
			return err
		}
		f.clock.Advance(late)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.next(t); got.ID != m.ID || got.Attempts != 1 {
		t.Errorf("delivered %s at attempt %d, want %s at attempt 1", got.ID, got.Attempts, m.ID)
	}
	if n := f.taken(t); n != before {
		t.Errorf("outbox.taken went from %v to %v, want no more", before, n)
	}
}

// Under the shortest lease a valid config allows, the relay still takes:
// its handlers get the timeout less the time the unit of work took.
func testHandoverTakesUnderTheTightestLease(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{Timeout: time.Minute, Lease: time.Minute + outbox.SettleTimeout})
	before := f.taken(t)
	m := f.message(t, "mail")
	err := f.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := f.store.Add(ctx, tx, m); err != nil {
			return err
		}
		f.clock.Advance(time.Second) // The unit of work takes a while.
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.next(t); got.ID != m.ID {
		t.Fatalf("delivered %s, want %s", got.ID, m.ID)
	}
	if n := f.taken(t); n != before+1 {
		t.Errorf("outbox.taken went from %v to %v, want one more", before, n)
	}
}

// A message taken and committed whose relay never settles it, as when its
// process dies, stays leased until the lease ends, and is then claimed
// like any other; the first delivery's late outcome changes nothing.
func testHandoverLeavesAMessageLeasedWhenItsProcessDies(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{})
	started, release := make(chan struct{}), make(chan struct{})
	f.handle = func(ctx context.Context, m outbox.Message) error {
		close(started)
		<-release
		return errors.New("too late")
	}
	before := f.taken(t)
	m := f.message(t, "mail")
	f.add(t, m)
	<-started
	if n := f.taken(t); n != before+1 {
		t.Fatalf("outbox.taken went from %v to %v, want one more", before, n)
	}
	// Another process, with a relay of its own on the same database.
	other, err := relay.New(f.store, map[string]outbox.Handler{
		"mail": func(_ context.Context, got outbox.Message) error {
			if got.ID != m.ID || got.Attempts != 2 {
				return fmt.Errorf("the other relay got %s at attempt %d, want %s at attempt 2", got.ID, got.Attempts, m.ID)
			}
			return nil
		},
	}, f.cfg, relay.WithClock(f.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if stats, err := other.Drain(t.Context()); err != nil || stats.Claimed != 0 {
		t.Fatalf("another relay's pass while the lease holds: %+v, %v; want nothing claimed", stats, err)
	}
	f.clock.Advance(f.cfg.Lease)
	if stats, err := other.Drain(t.Context()); err != nil || stats.Delivered != 1 {
		t.Fatalf("another relay's pass once the lease ended: %+v, %v; want the message delivered", stats, err)
	}
	close(release)
	f.stop()
	f.gone(t, m)
}

// A keyed message is claimed, not taken: only the store knows whether one
// of its key added before it is still held.
func testHandoverClaimsKeyedMessages(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{})
	before := f.taken(t)
	m := f.message(t, "mail")
	m.Key = "ada"
	f.add(t, m)
	if got := f.next(t); got.ID != m.ID {
		t.Fatalf("delivered %s, want %s", got.ID, m.ID)
	}
	if n := f.taken(t); n != before {
		t.Errorf("outbox.taken went from %v to %v for a keyed message, want no more", before, n)
	}
}

// gatedClaims is a store whose claims after the first wait until open is
// closed.
type gatedClaims struct {
	fixtureStore
	claims atomic.Int32
	open   chan struct{}
}

func (s *gatedClaims) ClaimWithOrigins(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]outbox.Claimed, error) {
	if s.claims.Add(1) > 1 {
		<-s.open
	}
	return s.fixtureStore.ClaimWithOrigins(ctx, now, lease, limit)
}

// While the relay drains a backlog it takes nothing, though it has slots
// free: what is already due goes first.
func testHandoverClaimsWhileABacklogDrains(t *testing.T, backend string) {
	gate := &gatedClaims{open: make(chan struct{})}
	f := newHandoverFixture(t, backend, outbox.RelayConfig{Batch: 1}, func(s fixtureStore) fixtureStore {
		gate.fixtureStore = s
		return gate
	})
	open := sync.OnceFunc(func() { close(gate.open) })
	// Due before the relay starts: its first claim comes back full, and
	// its next ones wait at the gate, each with its slot, which leaves
	// more than a batch's worth free.
	var backlog []outbox.Message
	for range 3 {
		backlog = append(backlog, f.message(t, "mail"))
	}
	f.add(t, backlog...)
	f.start(t)
	t.Cleanup(open) // Before the run stops: its claims wait at the gate.
	f.next(t)
	f.addLeft(t, "during a backlog")
	open()
	for range len(backlog) {
		f.next(t)
	}
	if n := f.taken(t); n != 0 {
		t.Errorf("outbox.taken = %v during a backlog, want 0", n)
	}
}

// While a topic's breaker is open its messages wait in the store, due,
// rather than being taken and spending their attempts on the outage.
func testHandoverClaimsWhileTheBreakerIsOpen(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{MaxAttempts: 100})
	before := f.taken(t)
	failed := make(chan uuid.UUID, 100)
	f.handle = func(_ context.Context, m outbox.Message) error {
		failed <- m.ID
		return errors.New("421 service not available")
	}
	// Failures of two messages, three in a row, open the breaker.
	for range 3 {
		f.add(t, f.message(t, "mail"))
		<-failed
	}
	f.idle(t)
	f.addLeft(t, "while its topic's breaker is open")
	if n := f.taken(t); n != before+3 {
		t.Errorf("outbox.taken went from %v to %v, want the three that failed", before, n)
	}
}

// An Add whose messages the relay takes only in part wakes the relays for
// the rest.
func testHandoverWakesForWhatItLeaves(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{})
	before := f.taken(t)
	taken, keyed := f.message(t, "mail"), f.message(t, "mail")
	keyed.Key = "ada"
	f.add(t, taken, keyed)
	got := map[uuid.UUID]bool{f.next(t).ID: true, f.next(t).ID: true}
	if !got[taken.ID] || !got[keyed.ID] {
		t.Errorf("delivered %v, want %s and %s", got, taken.ID, keyed.ID)
	}
	if n := f.taken(t); n != before+1 {
		t.Errorf("outbox.taken went from %v to %v, want one more", before, n)
	}
}

// The relay takes while more than a batch's worth of its slots are free,
// so that its claims always find room for one.
func testHandoverLeavesABatchOfSlotsToTheClaims(t *testing.T, backend string) {
	f := running(t, backend, outbox.RelayConfig{Batch: 2})
	before := f.taken(t)
	release := make(chan struct{})
	open := sync.OnceFunc(func() { close(release) })
	t.Cleanup(open)
	f.handle = func(context.Context, outbox.Message) error {
		<-release
		return nil
	}
	slots := relay.HeldBatches * f.cfg.Batch
	sent := 0
	for ; sent <= slots; sent++ {
		f.add(t, f.message(t, "mail"))
		if f.taken(t) == before+float64(sent) {
			break // This one was left.
		}
	}
	if want := slots - f.cfg.Batch; f.taken(t) != before+float64(want) {
		t.Errorf("the relay took %v while its handlers held their slots, want %d: all but a batch", f.taken(t)-before, want)
	}
	open()
	for range sent + 1 {
		f.next(t)
	}
}

// A transaction that runs no hooks, such as those in which SQLite's log
// applies events or catalogues projections, cannot hand a relay what it
// would take, nor give it back: the relay takes none of its messages.
func testHandoverTakesNothingFromTransactionsWithoutHooks(t *testing.T) {
	f := running(t, "sqlite", outbox.RelayConfig{})
	m := f.message(t, "mail")
	err := f.log.Catalog(t.Context(), "handover", 1, func(ctx context.Context, tx uow.Tx, v projections.Versions) (projections.Versions, error) {
		return v, f.store.Add(ctx, tx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec := f.stored(t, m); rec.Attempts != 0 {
		t.Errorf("a message added in the log's transaction was taken: %d attempts, want 0", rec.Attempts)
	}
	f.idle(t)
}
