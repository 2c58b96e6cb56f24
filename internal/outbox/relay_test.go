package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
)

// fixture is a relay on a fresh database whose clock stands still until
// the test moves f.now, with one handler for topic "mail" that calls
// f.handle.
type fixture struct {
	store  fixtureStore
	runner uow.Runner
	relay  *outbox.Relay
	now    time.Time
	handle outbox.Handler
}

// fixtureStore is an outbox store with the operators' views, which both
// backends have.
type fixtureStore interface {
	outbox.Store
	Buried(ctx context.Context, limit int) ([]outbox.Record, error)
	Lookup(ctx context.Context, id uuid.UUID) (outbox.Record, error)
}

// backends are the backends that the relay's tests of a guarantee that
// involves the store run on.
var backends = []string{"postgres", "sqlite"}

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newFixture(t *testing.T, opts ...outbox.RelayOption) *fixture {
	t.Helper()
	return newFixtureWith(t, outbox.RelayConfig{MaxAttempts: 3}, opts...)
}

// newFixtureWith returns a fixture on PostgreSQL.
func newFixtureWith(t *testing.T, cfg outbox.RelayConfig, opts ...outbox.RelayOption) *fixture {
	t.Helper()
	return newFixtureOn(t, "postgres", cfg, opts...)
}

// newFixtureOn returns a fixture on backend, one of [backends].
func newFixtureOn(t *testing.T, backend string, cfg outbox.RelayConfig, opts ...outbox.RelayOption) *fixture {
	t.Helper()
	t.Parallel()
	f := &fixture{now: epoch}
	clock := func() time.Time { return f.now }
	switch backend {
	case "postgres":
		db := pgtest.New(t)
		f.store, f.runner = db.Outbox(), db.Runner(clock)
	case "sqlite":
		db := sqlitetest.New(t)
		f.store, f.runner = db.Outbox(), db.Runner(clock)
	default:
		t.Fatalf("no backend %q", backend)
	}
	f.handle = func(context.Context, outbox.Message) error { return nil }
	handlers := map[string]outbox.Handler{
		"mail": func(ctx context.Context, m outbox.Message) error { return f.handle(ctx, m) },
	}
	opts = append([]outbox.RelayOption{outbox.WithClock(clock)}, opts...)
	relay, err := outbox.NewRelay(f.store, handlers, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Close() })
	f.relay = relay
	return f
}

// add commits one message for topic, created at f.now.
func (f *fixture) add(t *testing.T, topic string) outbox.Message {
	t.Helper()
	m, err := outbox.NewMessage(topic, map[string]string{"to": "ada@example.com"}, f.now)
	if err != nil {
		t.Fatal(err)
	}
	err = f.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		return f.store.Add(ctx, tx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// drain runs one synchronous pass of the relay at f.now.
func (f *fixture) drain(t *testing.T) outbox.DrainStats {
	t.Helper()
	stats, err := f.relay.Drain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return stats
}

// buried returns the buried message with id, failing t if there is none.
func (f *fixture) buried(t *testing.T, id uuid.UUID) outbox.Record {
	t.Helper()
	all, err := f.store.Buried(t.Context(), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range all {
		if b.ID == id {
			return b
		}
	}
	t.Fatalf("message %s is not buried; buried: %v", id, all)
	return outbox.Record{}
}

func TestRelayRetriesUntilDelivered(t *testing.T) {
	f := newFixture(t)
	var calls []int
	var delivered []uuid.UUID
	f.handle = func(_ context.Context, m outbox.Message) error {
		calls = append(calls, m.Attempts)
		if len(calls) < 3 {
			return errors.New("smtp: connection refused")
		}
		delivered = append(delivered, m.ID)
		return nil
	}
	m := f.add(t, "mail")

	f.drain(t) // fails, retry in 1s
	f.drain(t) // not due yet
	f.now = f.now.Add(outbox.Backoff(1))
	f.drain(t) // fails, retry in 2s
	f.now = f.now.Add(outbox.Backoff(2))
	f.drain(t) // succeeds
	f.now = f.now.Add(time.Hour)
	f.drain(t) // nothing left

	if !slices.Equal(calls, []int{1, 2, 3}) {
		t.Errorf("handler saw attempts %v, want [1 2 3]", calls)
	}
	if !slices.Equal(delivered, []uuid.UUID{m.ID}) {
		t.Errorf("delivered %v, want exactly %s", delivered, m.ID)
	}
}

func TestRelayBuriesAfterMaxAttempts(t *testing.T) {
	f := newFixture(t) // MaxAttempts 3
	calls := 0
	f.handle = func(context.Context, outbox.Message) error {
		calls++
		return errors.New("550 mailbox unavailable")
	}
	m := f.add(t, "mail")
	for attempt := 1; attempt <= 3; attempt++ {
		if got := f.drain(t); got.Claimed != 1 {
			t.Fatalf("attempt %d: claimed %d, want 1", attempt, got.Claimed)
		}
		f.now = f.now.Add(outbox.Backoff(attempt))
	}
	f.now = f.now.Add(24 * time.Hour)
	if got := f.drain(t); got.Claimed != 0 {
		t.Errorf("a buried message was claimed again: %+v", got)
	}
	if calls != 3 {
		t.Errorf("handler called %d times, want 3", calls)
	}
	b := f.buried(t, m.ID)
	if b.LastError != "550 mailbox unavailable" || b.Attempts != 3 {
		t.Errorf("buried with reason %q after %d attempts, want the last error after 3", b.LastError, b.Attempts)
	}
}

func TestRelayBuriesTopicWithoutHandler(t *testing.T) {
	f := newFixture(t)
	called := false
	f.handle = func(context.Context, outbox.Message) error { called = true; return nil }
	m := f.add(t, "sms.login_code")
	f.drain(t)
	if called {
		t.Error("the mail handler was called for another topic")
	}
	if b := f.buried(t, m.ID); !strings.Contains(b.LastError, `no handler for topic "sms.login_code"`) {
		t.Errorf("reason %q does not name the missing handler", b.LastError)
	}
}

// A relay that crashed mid-delivery never settles its claim. Once the lease
// ends the message is claimed again, and after MaxAttempts such claims it is
// buried without running the handler, which may be what crashes the relay.
func TestRelayRedeliversAfterCrashAndBuriesWhatKeepsCrashing(t *testing.T) {
	f := newFixture(t) // MaxAttempts 3, lease 2m
	var seen []int
	f.handle = func(_ context.Context, m outbox.Message) error {
		seen = append(seen, m.Attempts)
		return nil
	}
	f.add(t, "mail")
	crash := func() {
		t.Helper()
		got, err := f.store.Claim(t.Context(), f.now, outbox.DefaultLease, 10)
		if err != nil || len(got) != 1 {
			t.Fatalf("crashing relay claimed %v, %v; want the message", got, err)
		}
	}

	crash()
	f.drain(t)
	if len(seen) != 0 {
		t.Fatalf("message delivered while a crashed relay's lease held it")
	}
	f.now = f.now.Add(outbox.DefaultLease)
	f.drain(t)
	if !slices.Equal(seen, []int{2}) {
		t.Fatalf("after the lease ended the handler saw attempts %v, want [2]", seen)
	}

	m2 := f.add(t, "mail")
	for range 3 {
		crash()
		f.now = f.now.Add(outbox.DefaultLease)
	}
	f.drain(t)
	if len(seen) != 1 {
		t.Errorf("handler ran for a message claimed 4 times with MaxAttempts 3")
	}
	if b := f.buried(t, m2.ID); !strings.Contains(b.LastError, "claimed more often than allowed") {
		t.Errorf("reason %q does not say the message was claimed too often", b.LastError)
	}
}

func TestRelayTreatsPanicAsFailure(t *testing.T) {
	f := newFixture(t)
	calls := 0
	f.handle = func(context.Context, outbox.Message) error {
		calls++
		if calls == 1 {
			panic("template: nil map")
		}
		return nil
	}
	f.add(t, "mail")
	if got := f.drain(t); got.Delivered != 0 {
		t.Fatalf("a panicking handler counted as delivered: %+v", got)
	}
	f.now = f.now.Add(outbox.Backoff(1))
	if got := f.drain(t); got.Delivered != 1 {
		t.Fatalf("retry after the panic: %+v, want one delivered", got)
	}
	if calls != 2 {
		t.Errorf("handler called %d times, want 2", calls)
	}
}

// A handler that ignores its context is not run again while it runs: its
// context ends at the timeout, the pass goes on without it, and its message
// stays leased until the handler returns, whose failure is then recorded.
func TestRelayNeverRunsAMessageTwiceAtOnceWhileItsLeaseHolds(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { testNeverTwiceAtOnce(t, b) })
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

// Stopping a drain lets the delivery in flight finish and releases the rest
// of the batch, due again at once rather than when the lease ends.
func TestDrainStopsBetweenMessagesAndReleasesTheRest(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	var seen []uuid.UUID
	f.handle = func(ctx context.Context, m outbox.Message) error {
		seen = append(seen, m.ID)
		cancel() // An operator presses Ctrl-C during the first delivery.
		return ctx.Err()
	}
	first, second, third := f.add(t, "mail"), f.add(t, "mail"), f.add(t, "mail")
	stats, err := f.relay.Drain(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Drain after its context ended: %v, want context.Canceled", err)
	}
	if stats.Claimed != 3 || stats.Delivered != 1 || !slices.Equal(seen, []uuid.UUID{first.ID}) {
		t.Fatalf("stats %+v, handler saw %v; want the first delivered, its context not cancelled", stats, seen)
	}
	for _, m := range []outbox.Message{second, third} {
		rec, err := f.store.Lookup(t.Context(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.DueAt.Equal(f.now) {
			t.Errorf("message %s due at %v, want released at %v", m.ID, rec.DueAt, f.now)
		}
	}
}

// A lease only a little longer than the timeout still delivers: each
// delivery starts while the lease has a timeout's worth left, and the pass
// ends rather than claiming back what it released.
func TestDrainWithATightLeaseDeliversAndEnds(t *testing.T) {
	f := newFixtureWith(t, outbox.RelayConfig{Lease: 41 * time.Second, Timeout: 30 * time.Second, Batch: 2})
	calls := 0
	f.handle = func(context.Context, outbox.Message) error {
		calls++
		f.now = f.now.Add(2 * time.Second) // Each delivery takes two seconds.
		return nil
	}
	for range 3 {
		f.add(t, "mail")
	}
	stats := f.drain(t)
	if stats.Delivered != 1 || stats.Claimed != 2 || calls != 1 {
		t.Fatalf("first pass: %+v after %d calls; want one delivered and the other released", stats, calls)
	}
	stats = f.drain(t)
	if stats.Delivered != 1 || calls != 2 {
		t.Fatalf("second pass: %+v after %d calls; want the released message delivered", stats, calls)
	}
	f.drain(t)
	if calls != 3 {
		t.Errorf("after three passes the handler ran %d times, want 3", calls)
	}
}

// Two relays whose clocks disagree by several seconds: the one ahead claims
// a message while the one behind, by its own clock, still holds it. The one
// behind then fails its delivery, and its failure changes nothing of the
// other's claim, which delivers and acknowledges the message.
func TestRelayWhoseClaimEndedChangesNothingWhateverItsClock(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { testClaimEndedWhateverClock(t, b) })
	}
}

func testClaimEndedWhateverClock(t *testing.T, backend string) {
	f := newFixtureOn(t, backend, outbox.RelayConfig{MaxAttempts: 3})
	aheadNow := f.now.Add(outbox.DefaultLease - 3*time.Second + 7*time.Second)
	aheadRunning, proceed := make(chan struct{}), make(chan struct{})
	ahead, err := outbox.NewRelay(f.store, map[string]outbox.Handler{
		"mail": func(context.Context, outbox.Message) error {
			close(aheadRunning)
			<-proceed
			return nil
		},
	}, outbox.RelayConfig{}, outbox.WithClock(func() time.Time { return aheadNow }))
	if err != nil {
		t.Fatal(err)
	}
	aheadDone := make(chan outbox.DrainStats, 1)
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

func TestRelayKeepsTheReasonOfARetry(t *testing.T) {
	f := newFixture(t)
	f.handle = func(context.Context, outbox.Message) error { return errors.New("421 try again later") }
	m := f.add(t, "mail")
	f.drain(t)
	rec, err := f.store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LastError != "421 try again later" || !rec.DueAt.Equal(f.now.Add(outbox.Backoff(1))) {
		t.Errorf("after one failure: last error %q, due %v; want the error, due after Backoff(1)", rec.LastError, rec.DueAt)
	}
	// Not due until the backoff has passed; then it fails twice more.
	if got := f.drain(t); got.Claimed != 0 {
		t.Fatalf("claimed %d before the backoff passed", got.Claimed)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		f.now = f.now.Add(outbox.Backoff(attempt))
		f.drain(t)
	}
	if b := f.buried(t, m.ID); b.LastError != "421 try again later" {
		t.Errorf("reason %q", b.LastError)
	}
}

// recorder is a handler that counts deliveries per message and signals
// when want distinct messages have been delivered.
type recorder struct {
	mu    sync.Mutex
	count map[uuid.UUID]int
	want  int
	done  chan struct{}
}

func newRecorder(want int) *recorder {
	return &recorder{count: map[uuid.UUID]int{}, want: want, done: make(chan struct{})}
}

func (r *recorder) handle(_ context.Context, m outbox.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count[m.ID]++
	if len(r.count) == r.want && r.count[m.ID] == 1 {
		close(r.done)
	}
	return nil
}

func (r *recorder) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("delivered %d of %d messages", len(r.count), r.want)
	}
}

func TestRelaysOnOneDatabaseNeverDeliverAMessageTwice(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store, runner := db.Outbox(), db.Runner(nil)
	const n = 600
	rec := newRecorder(n)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 3 {
		relay, err := outbox.NewRelay(store, map[string]outbox.Handler{"mail": rec.handle},
			outbox.RelayConfig{Batch: 7, Interval: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := relay.Run(ctx); err != nil {
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

// addNow commits one message for topic "mail" to store, created now.
func addNow(t *testing.T, db *postgres.DB, store outbox.Store) {
	t.Helper()
	commit(t, db.Runner(nil), store, "mail", 1)
}

// commit adds n messages for topic to store in one unit of work of runner,
// created at its time.
func commit(t *testing.T, runner uow.Runner, store outbox.Store, topic string, n int) {
	t.Helper()
	err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		msgs := make([]outbox.Message, n)
		for i := range msgs {
			m, err := outbox.NewMessage(topic, map[string]int{"n": i}, tx.Now())
			if err != nil {
				return err
			}
			msgs[i] = m
		}
		return store.Add(ctx, tx, msgs...)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// claimSpy is a store that reports how many messages each claim returned.
type claimSpy struct {
	*postgres.Outbox
	claims chan int
}

func (s *claimSpy) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]outbox.Message, error) {
	msgs, err := s.Outbox.Claim(ctx, now, lease, limit)
	s.claims <- len(msgs)
	return msgs, err
}

// A relay that polls once an hour still delivers at once: the commit of an
// Add wakes it.
func TestRelayWakesOnCommit(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	spy := &claimSpy{Outbox: db.Outbox(), claims: make(chan int, 1000)}
	rec := newRecorder(1)
	relay, err := outbox.NewRelay(spy, map[string]outbox.Handler{"mail": rec.handle},
		outbox.RelayConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	// The relay claims once at start and once more when its listener
	// connects. After that only a wake-up can make it claim within the
	// test's deadline.
	for range 2 {
		select {
		case <-spy.claims:
		case <-time.After(30 * time.Second):
			t.Fatal("the relay did not claim at start")
		}
	}
	addNow(t, db, spy)
	rec.wait(t)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Stopping a relay lets the delivery in flight finish and acknowledges it.
func TestRelayFinishesDeliveryInFlightOnShutdown(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := db.Outbox()
	started, release := make(chan struct{}), make(chan struct{})
	relay, err := outbox.NewRelay(store, map[string]outbox.Handler{
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
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
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

// bare hides every optional capability of the store inside it, so that the
// relay runs its fallbacks: polling instead of wake-ups, one Ack per message
// instead of AckAll, and no backlog gauges.
type bare struct{ outbox.Store }

func TestRelayRunsOnAStoreWithoutOptionalCapabilities(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := bare{db.Outbox()}
	for _, capability := range []string{"Waker", "BatchAcker", "BacklogReader"} {
		var ok bool
		switch capability {
		case "Waker":
			_, ok = any(store).(outbox.Waker)
		case "BatchAcker":
			_, ok = any(store).(outbox.BatchAcker)
		case "BacklogReader":
			_, ok = any(store).(outbox.BacklogReader)
		}
		if ok {
			t.Fatalf("the wrapped store still has %s", capability)
		}
	}
	const n = 30
	rec := newRecorder(n)
	opt, reader := meter()
	relay, err := outbox.NewRelay(store, map[string]outbox.Handler{"mail": rec.handle},
		outbox.RelayConfig{Batch: 4, Interval: 5 * time.Millisecond}, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	for range n {
		addNow(t, db, store)
	}
	rec.wait(t)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	left, err := db.Outbox().Claim(t.Context(), time.Now().Add(time.Hour), time.Minute, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d delivered messages were not acknowledged one by one", len(left))
	}
	got := collect(t, reader)
	if got["outbox.delivered"]["mail"] != n {
		t.Errorf("outbox.delivered = %v, want %d", got["outbox.delivered"], n)
	}
	if _, ok := got["outbox.backlog.due"]; ok {
		t.Error("a store that cannot count its backlog has a backlog gauge")
	}
	if _, ok := got["outbox.breaker.state"]; !ok {
		t.Error("the breaker gauge is missing")
	}
}

// A message that fails on its own, while the others of its topic are
// delivered, is retried and buried as the seed says: the breaker stays
// closed.
func TestRelayBuriesAMessageThatFailsOnItsOwn(t *testing.T) {
	opt, reader := meter()
	f := newFixture(t, opt) // MaxAttempts 3
	poison := f.add(t, "mail")
	f.handle = func(_ context.Context, m outbox.Message) error {
		if m.ID == poison.ID {
			return errors.New("550 no such user")
		}
		return nil
	}
	delivered := 0
	for attempt := 1; attempt <= 3; attempt++ {
		f.add(t, "mail")
		f.add(t, "mail")
		stats := f.drain(t)
		delivered += stats.Delivered
		f.now = f.now.Add(outbox.Backoff(attempt))
	}
	if delivered != 6 {
		t.Errorf("delivered %d of the 6 good messages", delivered)
	}
	if b := f.buried(t, poison.ID); b.Attempts != 3 {
		t.Errorf("buried after %d attempts, want 3", b.Attempts)
	}
	if got := collectBy(t, reader, "outbox.breaker.state", "topic")["mail"]; got != 0 {
		t.Errorf("breaker state %v, want 0 (closed)", got)
	}
}

// While every delivery of a topic fails, its breaker opens: the relay stops
// claiming its messages, so they spend no attempts, while other topics flow;
// it probes with one message at a time, and the first probe that is
// delivered closes it.
func TestRelayBreakerStopsATopicWhoseDeliveriesAllFail(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := db.Outbox()
	now := epoch
	clock := func() time.Time { return now }
	down := true
	var mailCalls int
	opt, reader := meter()
	relay, err := outbox.NewRelay(store, map[string]outbox.Handler{
		"mail": func(context.Context, outbox.Message) error {
			mailCalls++
			if down {
				return errors.New("dial tcp: connection refused")
			}
			return nil
		},
		"sms": func(context.Context, outbox.Message) error { return nil },
	}, outbox.RelayConfig{}, outbox.WithClock(clock), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	add := func(topic string) {
		t.Helper()
		commit(t, db.Runner(clock), store, topic, 1)
	}
	drain := func(want outbox.DrainStats) {
		t.Helper()
		got, err := relay.Drain(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("drain at +%s: %+v, want %+v", now.Sub(epoch), got, want)
		}
	}
	state := func() float64 {
		return collectBy(t, reader, "outbox.breaker.state", "topic")["mail"]
	}
	for range 3 {
		add("mail")
	}
	drain(outbox.DrainStats{Claimed: 3, Retried: 3})
	if state() != 2 {
		t.Fatalf("breaker state after three failures of three messages = %v, want 2 (open)", state())
	}
	// Open: mail waits, whatever is due; sms flows.
	add("sms")
	now = now.Add(2 * time.Second)
	drain(outbox.DrainStats{Claimed: 1, Delivered: 1})
	// Half-open after five seconds: one probe, which fails and opens the
	// breaker for longer.
	now = epoch.Add(5 * time.Second)
	drain(outbox.DrainStats{Claimed: 1, Retried: 1})
	now = epoch.Add(14 * time.Second)
	drain(outbox.DrainStats{})
	// The destination is back: the next probe is delivered and closes the
	// breaker, and the rest follows in the same pass.
	down = false
	now = epoch.Add(15 * time.Second)
	drain(outbox.DrainStats{Claimed: 3, Delivered: 3})
	if state() != 0 {
		t.Errorf("breaker state after a delivered probe = %v, want 0 (closed)", state())
	}
	if mailCalls != 7 {
		t.Errorf("the mail handler ran %d times, want 7: 3 failures, 2 probes and the 2 others", mailCalls)
	}
}

// A handler still running when its message's lease ends is counted and
// logged with the message's ID; the message is then due again, and the
// handler's late outcome changes nothing of the claim that followed.
func TestRelayReportsAHandlerThatOutlivesItsLease(t *testing.T) {
	opt, reader := meter()
	var logs strings.Builder
	var logMu sync.Mutex
	f := newFixtureWith(t, outbox.RelayConfig{Timeout: 50 * time.Millisecond, MaxAttempts: 5}, opt,
		outbox.WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))))
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

// While a backlog is drained, each claim starts where the previous one
// found its earliest message. A message that becomes due before that point,
// committed late by a transaction that began long ago, is still delivered
// in the same pass.
func TestRelayDeliversAMessageCommittedBehindItsCursor(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			f := newFixtureOn(t, b, outbox.RelayConfig{Batch: 5})
			late, err := outbox.NewMessage("mail", "late", epoch.Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			f.handle = func(ctx context.Context, _ outbox.Message) error {
				var err error
				once.Do(func() {
					err = f.runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error { return f.store.Add(ctx, tx, late) })
				})
				return err
			}
			for range 20 {
				f.add(t, "mail")
			}
			if got := f.drain(t); got.Delivered != 21 {
				t.Fatalf("drain: %+v, want all 21 delivered", got)
			}
			if _, err := f.store.Lookup(t.Context(), late.ID); !errors.Is(err, outbox.ErrNotFound) {
				t.Errorf("the late message: %v, want delivered", err)
			}
		})
	}
}

// A stop whose grace runs out cuts the deliveries in flight short and
// releases their messages: due again at once, their attempts given back,
// nothing buried, and Run returns within the grace, not the timeout.
func TestRelayStopPastItsGraceReleasesWhatIsInFlight(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			// The relay's clock stands still at epoch: a release makes a
			// message due at epoch, a retry at epoch plus its backoff.
			f := newFixtureOn(t, backend, outbox.RelayConfig{Timeout: time.Hour, Lease: 2 * time.Hour, MaxAttempts: 3},
				outbox.WithStopGrace(50*time.Millisecond))
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

// cancelOnClaim is a store whose first claim that takes messages ends the
// relay's run as it returns, and drops its answer when its context has
// ended then, as a driver whose context ends while it reads the answer
// does: the messages are leased in the database all the same.
type cancelOnClaim struct {
	outbox.Store
	cancel context.CancelFunc
	once   sync.Once
}

func (s *cancelOnClaim) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]outbox.Message, error) {
	msgs, err := s.Store.Claim(ctx, now, lease, limit)
	if len(msgs) > 0 {
		s.once.Do(s.cancel)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return msgs, err
}

// A stop that comes while a claim is under way lets the claim finish and
// releases what it took: nothing stays leased with an attempt spent.
func TestRelayStopDuringAClaimReleasesWhatItTook(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixtureOn(t, backend, outbox.RelayConfig{MaxAttempts: 3})
			var msgs []outbox.Message
			for range 3 {
				msgs = append(msgs, f.add(t, "mail"))
			}
			ctx, cancel := context.WithCancel(t.Context())
			store := &cancelOnClaim{Store: f.store, cancel: cancel}
			delivered := make(chan uuid.UUID, len(msgs))
			relay, err := outbox.NewRelay(store, map[string]outbox.Handler{
				"mail": func(_ context.Context, m outbox.Message) error { delivered <- m.ID; return nil },
			}, outbox.RelayConfig{MaxAttempts: 3}, outbox.WithClock(func() time.Time { return f.now }))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = relay.Close() })
			if err := relay.Run(ctx); err != nil {
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
