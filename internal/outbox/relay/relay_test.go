package relay_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
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
	relay  *relay.Relay
	now    time.Time
	handle outbox.Handler
}

// fixtureStore is an outbox store with the operators' views, which both
// backends have.
type fixtureStore interface {
	outbox.RelayStore
	Buried(ctx context.Context, limit int) ([]outbox.Record, error)
	Lookup(ctx context.Context, id uuid.UUID) (outbox.Record, error)
}

// backends are the backends that the relay's tests of a guarantee that
// involves the store run on.
var backends = []string{"postgres", "sqlite"}

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newFixture(t *testing.T, opts ...relay.Option) *fixture {
	t.Helper()
	return newFixtureWith(t, outbox.RelayConfig{MaxAttempts: 3}, opts...)
}

// newFixtureWith returns a fixture on PostgreSQL.
func newFixtureWith(t *testing.T, cfg outbox.RelayConfig, opts ...relay.Option) *fixture {
	t.Helper()
	return newFixtureOn(t, "postgres", cfg, opts...)
}

// newFixtureOn returns a fixture on backend, one of [backends].
func newFixtureOn(t *testing.T, backend string, cfg outbox.RelayConfig, opts ...relay.Option) *fixture {
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
	opts = append([]relay.Option{relay.WithClock(clock)}, opts...)
	rel, err := relay.New(f.store, handlers, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	f.relay = rel
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
func (f *fixture) drain(t *testing.T) relay.DrainStats {
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

// runRelay runs relay until cancel is called; done receives what Run
// returned.
func runRelay(t *testing.T, rel *relay.Relay) (cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- rel.Run(ctx) }()
	return cancel, ran
}

// stopRelay stops a relay that runRelay runs and fails t when Run
// returned an error.
func stopRelay(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
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

// unlistened hides the Listener of the store inside it, the one optional
// interface a relay store may lack: SQLite's has none.
type unlistened struct{ outbox.RelayStore }

func TestRelayRunsOnAStoreWithoutListener(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := unlistened{db.Outbox()}
	if _, ok := any(store).(outbox.Listener); ok {
		t.Fatal("the wrapped store still has Listener")
	}
	const n = 30
	rec := newRecorder(n)
	opt, reader := meter()
	rel, err := relay.New(store, map[string]outbox.Handler{"mail": rec.handle},
		outbox.RelayConfig{Batch: 4, Interval: 5 * time.Millisecond}, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	cancel, done := runRelay(t, rel)
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
		t.Errorf("%d delivered messages were not acknowledged", len(left))
	}
	got := collect(t, reader)
	if got["outbox.delivered"]["mail"] != n {
		t.Errorf("outbox.delivered = %v, want %d", got["outbox.delivered"], n)
	}
	if _, ok := got["outbox.wakeups.listening"]; ok {
		t.Error("a store without Listener has a listening gauge")
	}
	if _, ok := got["outbox.breaker.state"]; !ok {
		t.Error("the breaker gauge is missing")
	}
}

// TestRelayOutcome checks what the relay records of a delivery that fails: a retry, a burial, and why.
func TestRelayOutcome(t *testing.T) {
	t.Run("buries after max attempts", testRelayBuriesAfterMaxAttempts)
	t.Run("leaves a topic without handler alone", testRelayLeavesATopicWithoutHandlerAlone)
	t.Run("redelivers after a crash and buries what keeps crashing", testRelayRedeliversAfterCrashAndBuriesWhatKeepsCrashing)
	t.Run("treats a panic as a failure", testRelayTreatsPanicAsFailure)
	t.Run("keeps the reason of a retry", testRelayKeepsTheReasonOfARetry)
	t.Run("buries a message that fails on its own", testRelayBuriesAMessageThatFailsOnItsOwn)
	t.Run("buries a permanent failure at once", testRelayBuriesAPermanentFailureAtOnce)
	t.Run("run buries a permanent failure at once", testRunBuriesAPermanentFailureAtOnce)
}

func testRelayBuriesAfterMaxAttempts(t *testing.T) {
	f := newFixture(t) // MaxAttempts 3
	calls := 0
	f.handle = func(context.Context, outbox.Message) error {
		calls++
		return errors.New("451 4.3.0 mailbox unavailable, try later")
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
	if b.LastError != "451 4.3.0 mailbox unavailable, try later" || b.Attempts != 3 {
		t.Errorf("buried with reason %q after %d attempts, want the last error after 3", b.LastError, b.Attempts)
	}
}

// A message whose topic the relay has no handler for is left alone, by
// Drain and by Run, on both backends: never claimed, its attempts unspent,
// due for a relay that has the handler, while the relay's own topics flow.
func testRelayLeavesATopicWithoutHandlerAlone(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixtureOn(t, backend, outbox.RelayConfig{MaxAttempts: 3})
			got := make(chan outbox.Message, 2)
			f.handle = func(_ context.Context, m outbox.Message) error { got <- m; return nil }
			// The orphan is due first, so a claim that took it would take
			// it before the mail.
			f.now = epoch.Add(-time.Second)
			orphan := f.add(t, "sms.login_code")
			f.now = epoch
			f.add(t, "mail")
			if stats := f.drain(t); stats != (relay.DrainStats{Claimed: 1, Delivered: 1}) {
				t.Errorf("drain: %+v, want the mail alone claimed and delivered", stats)
			}
			if m := <-got; m.Topic != "mail" {
				t.Errorf("the mail handler got a message of %q", m.Topic)
			}

			// Under Run, keyed so that it is claimed rather than taken from
			// the unit of work.
			want, err := outbox.NewMessage("mail", map[string]string{"to": "ada@example.com"}, f.now)
			if err != nil {
				t.Fatal(err)
			}
			want.Key = "user-1"
			if err := f.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error { return f.store.Add(ctx, tx, want) }); err != nil {
				t.Fatal(err)
			}
			cancel, done := runRelay(t, f.relay)
			select {
			case m := <-got:
				if m.ID != want.ID || m.Topic != want.Topic || string(m.Payload) != string(want.Payload) ||
					!m.CreatedAt.Equal(want.CreatedAt) || m.Key != want.Key || m.Attempts != 1 {
					t.Errorf("handler got %+v, want %+v with attempt 1", m, want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the mail handler was not called")
			}
			stopRelay(t, cancel, done)

			f.now = f.now.Add(time.Hour)
			if stats := f.drain(t); stats != (relay.DrainStats{}) {
				t.Errorf("drain an hour later: %+v, want nothing claimed", stats)
			}
			rec, err := f.store.Lookup(t.Context(), orphan.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Attempts != 0 || !rec.BuriedAt.IsZero() || rec.LastError != "" || !rec.DueAt.Equal(orphan.CreatedAt) {
				t.Errorf("the message without handler: attempts %d, buried %s, last error %q, due %s; want it untouched",
					rec.Attempts, rec.BuriedAt, rec.LastError, rec.DueAt)
			}
		})
	}
}

// A relay that crashed mid-delivery never settles its claim. Once the lease
// ends the message is claimed again, and after MaxAttempts such claims it is
// buried without running the handler, which may be what crashes the relay.
func testRelayRedeliversAfterCrashAndBuriesWhatKeepsCrashing(t *testing.T) {
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

func testRelayTreatsPanicAsFailure(t *testing.T) {
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

func testRelayKeepsTheReasonOfARetry(t *testing.T) {
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

// A message that fails on its own, while the others of its topic are
// delivered, is retried and buried as the seed says: the breaker stays
// closed.
func testRelayBuriesAMessageThatFailsOnItsOwn(t *testing.T) {
	opt, reader := meter()
	f := newFixture(t, opt) // MaxAttempts 3
	poison := f.add(t, "mail")
	f.handle = func(_ context.Context, m outbox.Message) error {
		if m.ID == poison.ID {
			return errors.New("451 4.3.0 try again later")
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

// A handler's error that wraps ErrPermanent buries its message at its
// first try, with the error as its reason, and does not count against
// the breaker: the destination answered. Failures as many as these, not
// permanent, would open it.
func testRelayBuriesAPermanentFailureAtOnce(t *testing.T) {
	opt, reader := meter()
	f := newFixture(t, opt) // MaxAttempts 3
	calls := 0
	f.handle = func(context.Context, outbox.Message) error {
		calls++
		return fmt.Errorf("550 5.1.1 no such mailbox: %w", outbox.ErrPermanent)
	}
	var added []outbox.Message
	for range 4 {
		added = append(added, f.add(t, "mail"))
	}
	if got := f.drain(t); got.Claimed != 4 || got.Buried != 4 || got.Retried != 0 {
		t.Errorf("drain: %+v, want 4 claimed and buried, none retried", got)
	}
	f.now = f.now.Add(24 * time.Hour)
	if got := f.drain(t); got.Claimed != 0 {
		t.Errorf("a buried message was claimed again: %+v", got)
	}
	if calls != 4 {
		t.Errorf("handler called %d times, want once a message", calls)
	}
	for _, m := range added {
		b := f.buried(t, m.ID)
		if b.Attempts != 1 || !strings.HasPrefix(b.LastError, "550 5.1.1 no such mailbox: ") {
			t.Errorf("buried after %d attempts with reason %q, want 1 and the handler's error", b.Attempts, b.LastError)
		}
	}
	if got := collectBy(t, reader, "outbox.breaker.state", "topic")["mail"]; got != 0 {
		t.Errorf("breaker state %v, want 0 (closed)", got)
	}
}

// Under Run, the subscriber settles the nack of a permanent failure as
// Drain does: the message is buried at its first try.
func testRunBuriesAPermanentFailureAtOnce(t *testing.T) {
	f := newFixture(t) // MaxAttempts 3
	called := make(chan struct{}, 1)
	f.handle = func(context.Context, outbox.Message) error {
		called <- struct{}{}
		return fmt.Errorf("550 5.1.1 no such mailbox: %w", outbox.ErrPermanent)
	}
	m := f.add(t, "mail")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.relay.Run(ctx) }()
	select {
	case <-called:
	case <-time.After(30 * time.Second):
		t.Fatal("the mail handler was not called")
	}
	// A stop lets the delivery in flight settle.
	stopRelay(t, cancel, done)
	if b := f.buried(t, m.ID); b.Attempts != 1 || !strings.HasPrefix(b.LastError, "550 5.1.1 no such mailbox: ") {
		t.Errorf("buried after %d attempts with reason %q, want 1 and the handler's error", b.Attempts, b.LastError)
	}
}
