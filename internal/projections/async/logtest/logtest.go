// Package logtest is the conformance suite of [async.Log]: every
// backend calls [Run] from a test of its own, so that all of them keep the
// same contract.
//
//	func TestLog(t *testing.T) {
//		logtest.Run(t, logtest.Features{SerialWriters: true}, func(t *testing.T) logtest.Harness {
//			db := sqlitetest.New(t)
//			return logtest.Harness{Log: db.Log(cfg), ...}
//		})
//	}
//
// Each case drives a plain Watermill router, as an asynchronous projection
// runs: one handler on [async.Topic] fed by the Log's subscriber,
// which records the events of each batch through [async.Log.Apply]
// into the backend's [Sink]. What the sink holds once the router has stopped is what a read
// model would hold. The suite waits for it with bounded polls, never with
// a sleep, and runs every unit of work at one fixed time.
package logtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/uow"
)

// Sink is a test table of the backend's database that the handler writes
// to, with the backend's own SQL.
type Sink interface {
	// Record adds a row holding e's ID as part of tx, the transaction that
	// [async.Log.Apply] hands over. It adds a row per call, so that
	// an event recorded twice is seen twice.
	Record(ctx context.Context, tx uow.Tx, e eventstore.Event) error
	// Recorded returns the IDs of the committed rows, in the order they
	// were recorded.
	Recorded(ctx context.Context) ([]uuid.UUID, error)
}

// Harness is what the suite needs of a backend: a fresh, migrated database
// per call, and a Log and a Sink on it.
type Harness struct {
	// Runner runs the units of work in which the suite appends events.
	Runner uow.Runner
	// Store is the event store of the database, empty when setup returns.
	Store eventstore.Store
	// Sink is the test table, empty when setup returns.
	Sink Sink
	// Log is the log under test. Its subscribers poll every few
	// milliseconds, deliver a failed message again as soon, give up on a
	// handler after an ack deadline of well under a second, read batches
	// of at least 10 events, and log through the logger given to
	// Subscriber as watermill-sql's subscriber does, with the trace
	// "Querying message" once per read of the log.
	Log async.Log
	// Hourly is a Log of the same database whose subscribers read the log
	// once an hour unless a commit of this process wakes them.
	Hourly async.Log
	// OtherProcess returns another Log of the same database, configured
	// as Log is, on connections of its own, as another process would open
	// them; they are closed when t ends. Once crash is called, every
	// connection of that Log fails from its next use on, as if its process
	// had died: what its transactions had not committed is lost. crash is
	// called from the handler of a message.
	OtherProcess func(t *testing.T) (log async.Log, crash func())
}

// Features states what a backend guarantees, as Watermill's pub/sub test
// suite does.
type Features struct {
	// SerialWriters: two write transactions can never be open at once
	// (SQLite), so no transaction can be in flight behind a committed one,
	// and the case that holds one open is skipped.
	SerialWriters bool
}

// within bounds every wait of the suite. On PostgreSQL a transaction open
// anywhere on the server holds back what a subscriber may deliver.
const within = 10 * time.Second

// now is the time of every unit of work of the suite's handlers.
var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// group is the consumer group of the cases that need one.
const group = "logtest.v1"

type testCase struct {
	name string
	// concurrent marks cases that need two write transactions at once.
	concurrent bool
	run        func(t *testing.T, h Harness)
}

// Run runs the suite as parallel subtests of t. setup is called once per
// subtest and must return a harness on a fresh database; it registers its
// own cleanup with t.
func Run(t *testing.T, f Features, setup func(t *testing.T) Harness) {
	cases := []testCase{
		{name: "CommitOrder", run: testCommitOrder},
		{name: "SchemaVersions", run: testSchemaVersions},
		{name: "Types", run: testTypes},
		{name: "PassesOverOtherTypes", run: testPassesOverOtherTypes},
		{name: "InFlightIsNeverSkipped", concurrent: true, run: testInFlightIsNeverSkipped},
		{name: "NackLeavesNoWrite", run: testNackLeavesNoWrite},
		{name: "WakesOnCommit", run: testWakesOnCommit},
		{name: "WakesOnCommitAfterAppendLater", run: testWakesOnCommitAfterAppendLater},
		{name: "Behind", run: testBehind},
		{name: "AckDeadlineMidBatchLosesNothing", run: testAckDeadlineMidBatch},
		{name: "ExactlyOnceAcrossACrash", run: testExactlyOnceAcrossACrash},
		{name: "CompetingConsumers", run: testCompetingConsumers},
		{name: "GroupsAreIndependent", run: testGroupsAreIndependent},
		{name: "RetiredGroupReadsNothing", run: testRetiredGroupReadsNothing},
		{name: "LoadsStreamsInItsTransaction", run: testLoadsStreams},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.concurrent && f.SerialWriters {
				t.Skip("the backend serialises writers (Features.SerialWriters is true)")
			}
			t.Parallel()
			h := setup(t)
			if h.Runner == nil || h.Store == nil || h.Sink == nil || h.Log == nil || h.OtherProcess == nil {
				t.Fatalf("setup returned an incomplete harness: %+v", h)
			}
			tc.run(t, h)
		})
	}
}

func testCommitOrder(t *testing.T, h Harness) {
	appendAcrossStreams(t, h, "x")
	c := consume(t, h, h.Log, group, nil, nil)
	appendAcrossStreams(t, h, "y")
	want := logOrder(t, h, 12)
	waitRecorded(t, h, len(want), c)
	c.stop(t)
	assertRecorded(t, h, want)
}

func testTypes(t *testing.T, h Harness) {
	types := []string{"logtest.a", "logtest.b", "logtest.c"}
	for i := range 3 {
		var events []eventstore.Event
		for j := range 6 {
			events = append(events, newEvent(t, types[(i+j)%3]))
		}
		mustAppend(t, h, fmt.Sprintf("s%d", i), events...)
	}
	c := consume(t, h, h.Log, group, []string{"logtest.a", "logtest.c"}, nil)
	// An event after all the others that the subscriber must leave out:
	// once it is recorded, any of them delivered would be too.
	mustAppend(t, h, "last", newEvent(t, "logtest.c"))
	var want []uuid.UUID
	for _, e := range readAll(t, h, 19) {
		if e.Type != "logtest.b" {
			want = append(want, e.ID)
		}
	}
	waitRecorded(t, h, len(want), c)
	c.stop(t)
	assertRecorded(t, h, want)
}

// PassesOverOtherTypes: a group of a rare type moves its offset over the
// events of other types, in windows of a batch, even where no event of its
// type follows, so that it does not read the same stretch of the log at
// every poll. Behind with no types counts what its offset has not passed.
func testPassesOverOtherTypes(t *testing.T, h Harness) {
	rare := mustAppend(t, h, "rare", newEvent(t, "logtest.rare"))[0]
	// More than a batch of events of another type after it, in units of
	// work of 7, so that windows end inside transactions.
	for i := range 6 {
		var events []eventstore.Event
		for range 7 {
			events = append(events, newEvent(t, "logtest.common"))
		}
		mustAppend(t, h, fmt.Sprintf("common-%d", i), events...)
	}
	c := consume(t, h, h.Log, group, []string{"logtest.rare"}, nil)
	waitRecorded(t, h, 1, c)
	deadline := time.Now().Add(within)
	for {
		n, _, err := h.Log.Behind(t.Context(), group, nil)
		if err != nil {
			t.Fatalf("Behind: %v", err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the offset stays %d events of other types short of the log's end after %s (%s)", n, within, c.logged())
		}
		c.waitPolls(t, 1)
	}
	c.stop(t)
	assertRecorded(t, h, []uuid.UUID{rare.ID})
}

func testInFlightIsNeverSkipped(t *testing.T, h Harness) {
	c := consume(t, h, h.Log, group, nil, nil)
	before := mustAppend(t, h, "before", newEvent(t, "logtest.a"))
	waitRecorded(t, h, 1, c)

	held := hold(t, h, "held", newEvent(t, "logtest.a"))
	later := mustAppend(t, h, "later", newEvent(t, "logtest.a"))
	// The first read that begins after the later commit ends before the
	// second begins: once two have begun, one has seen the later event
	// committed behind the held one in flight.
	c.waitPolls(t, 2)
	if got := recorded(t, h); !slices.Equal(got, ids(before)) {
		t.Fatalf("with an earlier transaction in flight, the sink holds %v, want only %v: the subscriber passed over the event in flight",
			got, ids(before))
	}

	held.commit(t)
	want := logOrder(t, h, 3)
	if !slices.Equal(want, slices.Concat(ids(before), ids(held.events), ids(later))) {
		t.Fatalf("ReadAll returns %v, want the event before, the held one and the later one", want)
	}
	waitRecorded(t, h, len(want), c)
	c.stop(t)
	assertRecorded(t, h, want)
}

// LoadsStreamsInItsTransaction: the store loads, in the transaction that
// Apply hands over, the stream of each event handed to it, which holds
// the event at its version, read back as the log handed it over, after
// those before it.
func testLoadsStreams(t *testing.T, h Harness) {
	first := newEvent(t, "logtest.a")
	first.Metadata.CausationID, first.Metadata.Extra = "logtest-cause", map[string]string{"k": "v"}
	mustAppend(t, h, "s", first, newEvent(t, "logtest.b"))
	mustAppend(t, h, "other", newEvent(t, "logtest.a"))
	mustAppend(t, h, "s", newEvent(t, "logtest.a"))
	var mu sync.Mutex
	var wrong []string
	c := consume(t, h, h.Log, group, nil, func(ctx context.Context, tx uow.Tx, e eventstore.Event) error {
		stream, err := h.Store.Load(ctx, tx, e.Stream, 0)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if int64(len(stream)) < e.Version || !reflect.DeepEqual(stream[e.Version-1], e) {
			wrong = append(wrong, fmt.Sprintf("%s at version %d: loaded %+v, handed %+v", e.Stream, e.Version, stream, e))
		}
		for i, loaded := range stream {
			if loaded.Version != int64(i+1) {
				wrong = append(wrong, fmt.Sprintf("%s: event %d of the load is at version %d", e.Stream, i, loaded.Version))
			}
		}
		return nil
	})
	want := logOrder(t, h, 4)
	waitRecorded(t, h, len(want), c)
	c.stop(t)
	assertRecorded(t, h, want)
	mu.Lock()
	defer mu.Unlock()
	for _, w := range wrong {
		t.Error(w)
	}
}

func testNackLeavesNoWrite(t *testing.T, h Harness) {
	events := mustAppend(t, h, "s", newEvent(t, "logtest.a"), newEvent(t, "logtest.a"), newEvent(t, "logtest.a"))
	failing := events[1].ID
	var mu sync.Mutex
	attempts := 0
	c := consume(t, h, h.Log, group, nil, func(_ context.Context, _ uow.Tx, e eventstore.Event) error {
		if e.ID != failing {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if attempts == 1 {
			return errors.New("logtest: the first attempt fails after it recorded the event")
		}
		return nil
	})
	want := logOrder(t, h, 3)
	waitRecorded(t, h, len(want), c)
	c.stop(t)
	assertRecorded(t, h, want)
	mu.Lock()
	defer mu.Unlock()
	if attempts != 2 {
		t.Errorf("the failing event was handled %d times, want 2: one failure and one retry", attempts)
	}
}

func testExactlyOnceAcrossACrash(t *testing.T, h Harness) {
	var events []eventstore.Event
	for range 6 {
		events = append(events, newEvent(t, "logtest.a"))
	}
	mustAppend(t, h, "s", events...)
	want := logOrder(t, h, len(events))

	// The subscriber reads the six events in one batch and dies in the
	// third, after it recorded two and a half of them.
	dying, crash := h.OtherProcess(t)
	crashed := make(chan struct{})
	var once sync.Once
	c := consume(t, h, dying, group, nil, func(_ context.Context, _ uow.Tx, e eventstore.Event) error {
		if e.ID == want[2] {
			once.Do(func() { crash(); close(crashed) })
		}
		return nil
	})
	select {
	case <-crashed:
	case <-time.After(within):
		t.Fatalf("the subscriber did not reach the third event within %s: %s", within, c.logged())
	}
	c.stop(t)
	if got := recorded(t, h); len(got) != 0 {
		t.Fatalf("after the crash the sink holds %v, want nothing: the batch had not committed", got)
	}

	again := consume(t, h, h.Log, group, nil, nil)
	waitRecorded(t, h, len(want), again)
	again.stop(t)
	assertRecorded(t, h, want)
}

func testCompetingConsumers(t *testing.T, h Harness) {
	for i := range 3 {
		appendAcrossStreams(t, h, fmt.Sprintf("before%d", i))
	}
	other, _ := h.OtherProcess(t)
	consumers := []*consumer{
		consume(t, h, h.Log, group, nil, nil),
		consume(t, h, h.Log, group, nil, nil),
		consume(t, h, other, group, nil, nil),
	}
	for i := range 3 {
		appendAcrossStreams(t, h, fmt.Sprintf("after%d", i))
	}
	want := logOrder(t, h, 36)
	waitRecorded(t, h, len(want), consumers...)
	for _, c := range consumers {
		c.stop(t)
	}
	assertRecorded(t, h, want)
}

func testGroupsAreIndependent(t *testing.T, h Harness) {
	appendAcrossStreams(t, h, "x")
	first := logOrder(t, h, 6)

	// One group after the other: the second starts from the beginning of
	// the log, whatever the first committed.
	for _, g := range []string{"logtest.one.v1", "logtest.two.v1"} {
		n := len(recorded(t, h)) + len(first)
		c := consume(t, h, h.Log, g, nil, nil)
		waitRecorded(t, h, n, c)
		c.stop(t)
	}
	assertRecorded(t, h, slices.Concat(first, first))

	// Both at once, each from where it stands.
	one := consume(t, h, h.Log, "logtest.one.v1", nil, nil)
	two := consume(t, h, h.Log, "logtest.two.v1", nil, nil)
	appendAcrossStreams(t, h, "y")
	all := logOrder(t, h, 12)
	waitRecorded(t, h, 2*len(all), one, two)
	one.stop(t)
	two.stop(t)
	got := recorded(t, h)
	if len(got) != 2*len(all) || !slices.Equal(got[:2*len(first)], slices.Concat(first, first)) {
		t.Fatalf("the sink holds %v, want the first events twice, then the new ones twice each", got)
	}
	counts := map[uuid.UUID]int{}
	for _, id := range got[2*len(first):] {
		counts[id]++
	}
	for _, id := range all[len(first):] {
		if counts[id] != 2 {
			t.Errorf("event %s recorded %d times, want twice: once per group", id, counts[id])
		}
	}
}

// consumer is a router that runs one handler on a subscriber of a Log.
type consumer struct {
	router *message.Router
	done   chan error
	log    *testLogger
	once   sync.Once
}

// consume starts a router whose handler records each event of the group
// into h.Sink through log.Apply and then calls after, if given, in the same
// fn: an error of after fails the attempt. The router stops when t ends
// unless stop stops it first.
func consume(t *testing.T, h Harness, log async.Log, group string, types []string, after func(ctx context.Context, tx uow.Tx, e eventstore.Event) error) *consumer {
	t.Helper()
	logger := newTestLogger()
	sub, err := log.Subscriber(group, types, logger)
	if err != nil {
		t.Fatalf("Subscriber(%q, %v): %v", group, types, err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: within}, logger)
	if err != nil {
		t.Fatal(err)
	}
	router.AddConsumerHandler("logtest", async.Topic, sub, func(msg *message.Message) error {
		return log.Apply(msg, now, func(ctx context.Context, tx uow.Tx, events []eventstore.Event) error {
			if !tx.Now().Equal(now) {
				return fmt.Errorf("logtest: Apply's tx.Now() = %v, want %v", tx.Now(), now)
			}
			for _, e := range events {
				if err := h.Sink.Record(ctx, tx, e); err != nil {
					return err
				}
				if after != nil {
					if err := after(ctx, tx, e); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
	c := &consumer{router: router, done: make(chan error, 1), log: logger}
	go func() { c.done <- router.Run(context.Background()) }()
	// Registered after setup's cleanups, so it runs before them: the
	// database is not closed under a running subscriber.
	t.Cleanup(func() { c.stop(t) })
	select {
	case <-router.Running():
	case err := <-c.done:
		t.Fatalf("router stopped before it ran: %v", err)
	case <-time.After(within):
		t.Fatalf("router did not start within %s", within)
	}
	return c
}

// stop closes the router and waits until it has stopped; only the first
// call counts.
func (c *consumer) stop(t *testing.T) {
	t.Helper()
	c.once.Do(func() {
		if err := c.router.Close(); err != nil {
			t.Errorf("close router: %v", err)
		}
		select {
		case err := <-c.done:
			if err != nil {
				t.Errorf("router: %v", err)
			}
		case <-time.After(within):
			t.Errorf("router did not stop within %s", within)
		}
	})
}

// waitPolls waits until the subscriber has begun n more reads of the log.
func (c *consumer) waitPolls(t *testing.T, n int) {
	t.Helper()
	c.log.mu.Lock()
	target := c.log.polls + n
	c.log.mu.Unlock()
	c.waitPolled(t, target)
}

// waitPolled waits until the subscriber has begun n reads of the log since
// it started.
func (c *consumer) waitPolled(t *testing.T, target int) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		c.log.mu.Lock()
		polls := c.log.polls
		c.log.mu.Unlock()
		if polls >= target {
			return
		}
		select {
		case <-c.log.polled:
		case <-deadline.C:
			t.Fatalf("the subscriber had read the log %d times after %s, want %d (does it log watermill-sql's trace %q through the logger given to Subscriber?)",
				polls, within, target, pollTrace)
		}
	}
}

// logged describes the errors the router and the subscriber logged.
func (c *consumer) logged() string {
	c.log.mu.Lock()
	defer c.log.mu.Unlock()
	if len(c.log.errs) == 0 {
		return "no error logged"
	}
	return fmt.Sprintf("%d errors logged, the last: %v", len(c.log.errs), c.log.errs[len(c.log.errs)-1])
}

// pollTrace is what watermill-sql's subscriber traces before each read.
const pollTrace = "Querying message"

// testLogger counts the subscriber's reads of the log and keeps the errors
// logged; it writes nothing.
type testLogger struct {
	mu     sync.Mutex
	polls  int
	errs   []error
	polled chan struct{}
}

var _ watermill.LoggerAdapter = (*testLogger)(nil)

func newTestLogger() *testLogger { return &testLogger{polled: make(chan struct{}, 1)} }

func (l *testLogger) Error(msg string, err error, _ watermill.LogFields) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Errorf("%s: %w", msg, err))
}

func (l *testLogger) Info(string, watermill.LogFields)  {}
func (l *testLogger) Debug(string, watermill.LogFields) {}

func (l *testLogger) Trace(msg string, _ watermill.LogFields) {
	if msg != pollTrace {
		return
	}
	l.mu.Lock()
	l.polls++
	l.mu.Unlock()
	select {
	case l.polled <- struct{}{}:
	default:
	}
}

func (l *testLogger) With(watermill.LogFields) watermill.LoggerAdapter { return l }

// waitRecorded polls the sink until it holds at least n rows.
func waitRecorded(t *testing.T, h Harness, n int, consumers ...*consumer) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		got := recorded(t, h)
		if len(got) >= n {
			return
		}
		select {
		case <-deadline.C:
			var logs []string
			for _, c := range consumers {
				logs = append(logs, c.logged())
			}
			t.Fatalf("the sink holds %d of %d events after %s; consumers: %v", len(got), n, within, logs)
		case <-poll.C:
		}
	}
}

// assertRecorded checks that the sink holds exactly want, in order.
func assertRecorded(t *testing.T, h Harness, want []uuid.UUID) {
	t.Helper()
	got := recorded(t, h)
	if slices.Equal(got, want) {
		return
	}
	counts := map[uuid.UUID]int{}
	for _, id := range got {
		counts[id]++
	}
	for _, id := range want {
		if counts[id] != 1 {
			t.Errorf("event %s recorded %d times, want once", id, counts[id])
		}
	}
	t.Fatalf("the sink holds %d events %v, want %d in log order %v", len(got), got, len(want), want)
}

func recorded(t *testing.T, h Harness) []uuid.UUID {
	t.Helper()
	got, err := h.Sink.Recorded(t.Context())
	if err != nil {
		t.Fatalf("Sink.Recorded: %v", err)
	}
	return got
}

// logOrder returns the IDs of the log's n events in the order of ReadAll.
func logOrder(t *testing.T, h Harness, n int) []uuid.UUID {
	t.Helper()
	return ids(readAll(t, h, n))
}

// readAll reads the whole log, waiting until it returns n events: on
// PostgreSQL a transaction open elsewhere on the server holds them back.
func readAll(t *testing.T, h Harness, n int) []eventstore.Event {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		var got []eventstore.Event
		err := h.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			var err error
			got, err = h.Store.ReadAll(ctx, tx, eventstore.Position{}, n+1)
			return err
		})
		if err != nil {
			t.Fatalf("ReadAll: %v", err)
		}
		if len(got) > n {
			t.Fatalf("ReadAll returned %d events, want %d", len(got), n)
		}
		if len(got) == n {
			return got
		}
		select {
		case <-deadline.C:
			t.Fatalf("ReadAll returned %d of %d committed events within %s", len(got), n, within)
		case <-poll.C:
		}
	}
}

// appendAcrossStreams appends six events to three streams named after
// prefix in four units of work, one of which writes two streams.
func appendAcrossStreams(t *testing.T, h Harness, prefix string) {
	t.Helper()
	stream := func(i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
	mustAppend(t, h, stream(0), newEvent(t, "logtest.a"), newEvent(t, "logtest.a"))
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		if _, err := h.Store.Append(ctx, tx, stream(1), eventstore.Any, newEvent(t, "logtest.a")); err != nil {
			return err
		}
		_, err := h.Store.Append(ctx, tx, stream(2), eventstore.Any, newEvent(t, "logtest.a"))
		return err
	})
	mustAppend(t, h, stream(0), newEvent(t, "logtest.a"))
	mustAppend(t, h, stream(2), newEvent(t, "logtest.a"))
}

func newEvent(t *testing.T, typ string) eventstore.Event {
	t.Helper()
	e, err := eventstore.NewEvent(typ, map[string]string{"k": "v"}, eventstore.Metadata{CorrelationID: "logtest"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func do(t *testing.T, h Harness, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	if err := h.Runner.Do(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// mustAppend appends events to stream in a unit of work of their own.
func mustAppend(t *testing.T, h Harness, stream string, events ...eventstore.Event) []eventstore.Event {
	t.Helper()
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		_, err := h.Store.Append(ctx, tx, stream, eventstore.Any, events...)
		return err
	})
	return events
}

// held is a unit of work that has appended its events and stays open.
type held struct {
	events  []eventstore.Event
	release chan struct{}
	done    chan error
	once    sync.Once
}

// hold starts a unit of work that appends e to stream and then stays open
// until commit is called, or t ends.
func hold(t *testing.T, h Harness, stream string, e eventstore.Event) *held {
	t.Helper()
	hd := &held{events: []eventstore.Event{e}, release: make(chan struct{}), done: make(chan error, 1)}
	t.Cleanup(func() { hd.once.Do(func() { close(hd.release) }) })
	appended := make(chan error, 1)
	go func() {
		hd.done <- h.Runner.Do(context.Background(), func(ctx context.Context, tx uow.Tx) error {
			_, err := h.Store.Append(ctx, tx, stream, eventstore.Any, e)
			appended <- err
			if err != nil {
				return err
			}
			<-hd.release
			return nil
		})
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatalf("held unit of work: append to %s: %v", stream, err)
		}
	case err := <-hd.done:
		t.Fatalf("held unit of work ended before it appended: %v", err)
	case <-time.After(within):
		t.Fatalf("held unit of work did not append within %s", within)
	}
	return hd
}

// commit lets the held unit of work commit and waits until it has.
func (hd *held) commit(t *testing.T) {
	t.Helper()
	hd.once.Do(func() { close(hd.release) })
	select {
	case err := <-hd.done:
		if err != nil {
			t.Fatalf("held unit of work: %v", err)
		}
	case <-time.After(within):
		t.Fatalf("held unit of work did not commit within %s", within)
	}
}

func ids(events []eventstore.Event) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// WakesOnCommit: a subscriber that reads the log once an hour still applies
// an event at once, because the commit that appended it wakes it.
func testWakesOnCommit(t *testing.T, h Harness) {
	testWakesOnCommitOf(t, h, func(t *testing.T, e eventstore.Event) {
		mustAppend(t, h, "wake-1", e)
	})
}

// WakesOnCommitAfterAppendLater: so does the commit of a unit of work that
// appended with AppendLater, whose append may go with the commit itself.
func testWakesOnCommitAfterAppendLater(t *testing.T, h Harness) {
	testWakesOnCommitOf(t, h, func(t *testing.T, e eventstore.Event) {
		do(t, h, func(ctx context.Context, tx uow.Tx) error {
			_, err := h.Store.AppendLater(ctx, tx, "wake-1", eventstore.NoStream, e)
			return err
		})
	})
}

// testWakesOnCommitOf checks that an event that commit appends reaches a
// subscriber of h.Hourly that waits for its next read.
func testWakesOnCommitOf(t *testing.T, h Harness, commit func(t *testing.T, e eventstore.Event)) {
	if h.Hourly == nil {
		t.Fatal("Harness.Hourly is nil")
	}
	c := consume(t, h, h.Hourly, group, nil, nil)
	// Its first read, at start, found nothing: it waits now.
	c.waitPolled(t, 1)
	e := newEvent(t, "logtest.a")
	commit(t, e)
	waitRecorded(t, h, 1, c)
	if got := recorded(t, h); !slices.Equal(got, []uuid.UUID{e.ID}) {
		t.Fatalf("the sink holds %v, want only %s", got, e.ID)
	}
}

// Behind: a group that has not subscribed yet has every event of its types
// to apply; one that has applied them all has none, and no oldest time.
func testBehind(t *testing.T, h Harness) {
	behind := func(types []string) (int64, time.Time) {
		t.Helper()
		n, oldest, err := h.Log.Behind(t.Context(), group, types)
		if err != nil {
			t.Fatalf("Behind(%q, %v): %v", group, types, err)
		}
		return n, oldest
	}
	if n, oldest := behind(nil); n != 0 || !oldest.IsZero() {
		t.Fatalf("Behind of an empty log = %d, %v; want 0 and no time", n, oldest)
	}
	mustAppend(t, h, "behind-1", newEvent(t, "logtest.a"), newEvent(t, "logtest.b"))
	mustAppend(t, h, "behind-2", newEvent(t, "logtest.a"))
	stored := logOrder(t, h, 3)
	if n, oldest := behind(nil); n != 3 || oldest.IsZero() {
		t.Fatalf("Behind before subscribing = %d, %v; want 3 and the first's time", n, oldest)
	}
	if n, _ := behind([]string{"logtest.b"}); n != 1 {
		t.Fatalf("Behind of type logtest.b = %d, want 1", n)
	}
	c := consume(t, h, h.Log, group, nil, nil)
	waitRecorded(t, h, len(stored), c)
	c.stop(t)
	if n, oldest := behind(nil); n != 0 || !oldest.IsZero() {
		t.Fatalf("Behind once all is applied = %d, %v; want 0 and no time", n, oldest)
	}
}

// AckDeadlineMidBatchLosesNothing: when the subscriber stops waiting for
// its handler (the batch's ack deadline passed) it commits its transaction
// without the offset having moved: the batch is delivered again and
// applied, once.
func testAckDeadlineMidBatch(t *testing.T, h Harness) {
	appendAcrossStreams(t, h, "mid")
	all := logOrder(t, h, 6)
	logger := newTestLogger()
	sub, err := h.Log.Subscriber(group, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: within}, logger)
	if err != nil {
		t.Fatal(err)
	}
	handed := 0
	router.AddConsumerHandler("logtest-mid", async.Topic, sub, func(msg *message.Message) error {
		if handed++; handed == 1 {
			// Outlive the ack deadline: the subscriber gives up on this
			// batch and commits what it has.
			<-msg.Context().Done()
			return nil
		}
		return h.Log.Apply(msg, now, func(ctx context.Context, tx uow.Tx, events []eventstore.Event) error {
			for _, e := range events {
				if err := h.Sink.Record(ctx, tx, e); err != nil {
					return err
				}
			}
			return nil
		})
	})
	done := make(chan error, 1)
	go func() { done <- router.Run(context.Background()) }()
	t.Cleanup(func() {
		_ = router.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	waitRecorded(t, h, len(all))
	if got := recorded(t, h); !slices.Equal(got, all) {
		t.Fatalf("the sink holds %v, want every event once, in log order: %v", got, all)
	}
	if handed < 2 {
		t.Fatalf("the handler was handed %d messages; the case needs the batch handed over again after the deadline", handed)
	}
}

// RetiredGroupReadsNothing: once a group's offset is retired (a rebuild
// switched away from its version), its subscriber applies nothing more, a
// subscriber of the group that comes late does not start it again at the
// log's start, and Behind counts nothing for it.
func testRetiredGroupReadsNothing(t *testing.T, h Harness) {
	before := mustAppend(t, h, "r-1", newEvent(t, "logtest.a"), newEvent(t, "logtest.a"))
	c := consume(t, h, h.Log, group, nil, nil)
	waitRecorded(t, h, len(before), c)
	err := h.Log.Catalog(t.Context(), "logtest", 1, func(ctx context.Context, tx uow.Tx, v projections.Versions) (projections.Versions, error) {
		return v, h.Log.Retire(ctx, tx, group)
	})
	if err != nil {
		t.Fatalf("Catalog with Retire: %v", err)
	}
	mustAppend(t, h, "r-2", newEvent(t, "logtest.a"))
	late := consume(t, h, h.Log, group, nil, nil)
	// Several reads of the log by both, after the append.
	c.waitPolls(t, 3)
	late.waitPolls(t, 3)
	c.stop(t)
	late.stop(t)
	assertRecorded(t, h, ids(before))
	if n, _, err := h.Log.Behind(t.Context(), group, nil); err != nil || n != 0 {
		t.Errorf("Behind of a retired group = %d, %v; want 0", n, err)
	}
}

// testSchemaVersions: the log hands a projection each event at the schema
// version it was appended with, so that the projection can upcast it.
func testSchemaVersions(t *testing.T, h Harness) {
	want := map[uuid.UUID]int{}
	var events []eventstore.Event
	for i, v := range []int{0, 1, 2, 3} {
		e := newEvent(t, []string{"logtest.a", "logtest.b"}[i%2])
		e.SchemaVersion = v
		want[e.ID] = max(v, 1)
		events = append(events, e)
	}
	mustAppend(t, h, "versions", events...)
	var mu sync.Mutex
	got := map[uuid.UUID]int{}
	c := consume(t, h, h.Log, group, nil, func(_ context.Context, _ uow.Tx, e eventstore.Event) error {
		mu.Lock()
		defer mu.Unlock()
		got[e.ID] = e.SchemaVersion
		return nil
	})
	waitRecorded(t, h, len(events), c)
	c.stop(t)
	mu.Lock()
	defer mu.Unlock()
	if !maps.Equal(got, want) {
		t.Errorf("the log handed the events at schema versions %v, want %v", got, want)
	}
}
