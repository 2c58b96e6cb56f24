package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// applied is a test read model: the IDs of the events applied, in order.
type applied struct{ db *postgres.DB }

func newApplied(t *testing.T, db *postgres.DB) applied {
	t.Helper()
	if _, err := db.Pool().Exec(t.Context(), `CREATE TABLE logtest_applied (n bigserial PRIMARY KEY, id uuid NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return applied{db}
}

func (a applied) Record(ctx context.Context, tx uow.Tx, e eventstore.Event) error {
	stx, err := postgres.SQLTx(tx)
	if err != nil {
		return err
	}
	_, err = stx.ExecContext(ctx, `INSERT INTO logtest_applied (id) VALUES ($1)`, e.ID.String())
	return err
}

func (a applied) Recorded(ctx context.Context) ([]uuid.UUID, error) {
	rows, err := a.db.Pool().Query(ctx, `SELECT id FROM logtest_applied ORDER BY n`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// recording is an asynchronous projection that records the events of the
// given types in a test table, and fails on the events fail says.
type recording struct {
	sink  applied
	types []string
	fail  func(eventstore.Event) bool
}

func (recording) Name() string                        { return "recording" }
func (recording) Version() int                        { return 1 }
func (p recording) Types() []string                   { return p.types }
func (recording) Reset(context.Context, uow.Tx) error { return nil }
func (p recording) Apply(ctx context.Context, tx uow.Tx, events ...eventstore.Event) error {
	for _, e := range events {
		if err := p.sink.Record(ctx, tx, e); err != nil {
			return err
		}
		if p.fail != nil && p.fail(e) {
			return fmt.Errorf("cannot apply %s", e.ID)
		}
	}
	return nil
}

// appendEvents appends n events of typ to stream in one unit of work and
// returns their IDs.
func appendEvents(t *testing.T, db *postgres.DB, stream, typ string, n int) []uuid.UUID {
	t.Helper()
	types := make([]string, n)
	for i := range types {
		types[i] = typ
	}
	return appendTyped(t, db, stream, types...)
}

// appendTyped appends an event of each of types to stream in one unit of
// work, so that the log sees all of them at once, and returns their IDs.
func appendTyped(t *testing.T, db *postgres.DB, stream string, types ...string) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	err := db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		events := make([]eventstore.Event, len(types))
		for i, typ := range types {
			e, err := eventstore.NewEvent(typ, map[string]int{"i": i}, eventstore.Metadata{})
			if err != nil {
				return err
			}
			events[i] = e
			ids = append(ids, e.ID)
		}
		_, err := db.Events().Append(ctx, tx, stream, eventstore.Any, events...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestProjectionRunner runs asynchronous projections on the PostgreSQL event log: how a runner stops, follows the registry and spends its tries when the database fails.
func TestProjectionRunner(t *testing.T) {
	t.Parallel()
	t.Run("StopsAProjectionThatCannotApplyAnEvent", testRunnerStopsAProjectionThatCannotApplyAnEvent)
	t.Run("FollowsTheRegistryThroughAnOutage", testRunnerFollowsTheRegistryThroughAnOutage)
	t.Run("UnavailableDatabaseSpendsNoTries", testUnavailableDatabaseSpendsNoTries)
	t.Run("BrokenConnectionSpendsNoTries", testBrokenConnectionSpendsNoTries)
	t.Run("TracesEachBatch", testRunnerTracesEachBatch)
}

// Each batch is a span with the projection, its events and their
// positions; one that fails says at which event, and not what the
// projection's error said, which may quote the event.
func testRunnerTracesEachBatch(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	sink := newApplied(t, db)
	// One unit of work: the log, which reads only below the oldest
	// transaction still open anywhere on the server, sees all six in its
	// first batch however busy the server is.
	ids := appendTyped(t, db, "s-1", "test.good", "test.good", "test.good", "test.bad", "test.good", "test.good")
	bad := ids[3:4]
	log := db.Log(postgres.LogConfig{PollInterval: 10 * time.Millisecond, ResendInterval: time.Millisecond})
	p := recording{sink: sink, fail: func(e eventstore.Event) bool { return e.Type == "test.bad" }}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	r, err := async.NewRunner(log, []projections.Projection{p}, async.WithMaxTries(2), async.WithRunnerTracer(tp))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st := r.Status()
	if len(st) != 1 || st[0].State != async.StateFailed {
		t.Fatalf("status %+v, want failed", st)
	}
	failedAt := projections.FormatPosition(st[0].Position)

	var batches []map[attribute.Key]attribute.Value
	for _, s := range rec.Ended() {
		if s.Name() != "apply recording" {
			continue
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		batches = append(batches, attrs)
		if attrs["projection.name"].AsString() != "recording" || attrs["projection.version"].AsInt64() != 1 {
			t.Errorf("span %v does not name the projection", attrs)
		}
		if s.Status().Code != codes.Error || attrs["projection.failed.event_id"].AsString() != bad[0].String() ||
			attrs["projection.failed.position"].AsString() != failedAt {
			t.Errorf("span of a batch that failed: status %v, attributes %v; want an error at event %s, position %s", s.Status(), attrs, bad[0], failedAt)
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				if strings.Contains(kv.Value.Emit(), "cannot apply") {
					t.Errorf("span event %s repeats the projection's error: %s", ev.Name, kv.Value.Emit())
				}
			}
		}
		if strings.Contains(s.Status().Description, "cannot apply") {
			t.Errorf("span status %q repeats the projection's error", s.Status().Description)
		}
	}
	if len(batches) != 2 {
		t.Fatalf("%d batch spans, want 2: one per try", len(batches))
	}
	// The first try hands over all six events, the second the three from
	// the one that failed.
	for i, want := range []int64{6, 3} {
		b := batches[i]
		if got := b["projection.batch.events"].AsInt64(); got != want {
			t.Errorf("batch %d: %d events, want %d", i+1, got, want)
		}
		first, err1 := projections.ParsePosition(b["projection.batch.first"].AsString())
		last, err2 := projections.ParsePosition(b["projection.batch.last"].AsString())
		end, err3 := projections.ParsePosition(b["projection.batch.end"].AsString())
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("batch %d: %v", i+1, err)
		}
		if !first.Less(last) || last != end {
			t.Errorf("batch %d: positions %v to %v, end %v; want the six events' range", i+1, first, last, end)
		}
		if i == 1 && first != st[0].Position {
			t.Errorf("batch 2 starts at %v, want the event that failed, %v", first, st[0].Position)
		}
	}
}

// A projection that cannot apply an event is tried again, then marked
// failed at that event, and stops: the events after it are not applied,
// and its writes for the failed event are rolled back each time.
func testRunnerStopsAProjectionThatCannotApplyAnEvent(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	sink := newApplied(t, db)
	first := appendEvents(t, db, "s-1", "test.good", 3)
	bad := appendEvents(t, db, "s-1", "test.bad", 1)
	appendEvents(t, db, "s-1", "test.good", 2)
	log := db.Log(postgres.LogConfig{PollInterval: 10 * time.Millisecond, ResendInterval: time.Millisecond})
	p := recording{sink: sink, fail: func(e eventstore.Event) bool { return e.Type == "test.bad" }}
	reader := sdkmetric.NewManualReader()
	r, err := async.NewRunner(log, []projections.Projection{p}, async.WithMaxTries(3),
		async.WithRunnerMeter(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the runner did not stop when its only projection failed")
	}
	st := r.Status()
	if len(st) != 1 || st[0].State != async.StateFailed || st[0].Err == nil || st[0].Applied != 3 {
		t.Fatalf("status %+v, want failed after 3 applied", st)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	gauges := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && len(g.DataPoints) == 1 {
				gauges[m.Name] = g.DataPoints[0].Value
			}
		}
	}
	f, failed, err := log.Failure(t.Context(), projections.Group(p))
	if err != nil || !failed || f.Position != st[0].Position || !strings.Contains(f.Error, "cannot apply") {
		t.Errorf("recorded failure %+v, %t, %v; want the bad event's position and error", f, failed, err)
	}
	if gauges["projections.state"] != 1 || gauges["projections.behind.events"] < 3 {
		t.Errorf("gauges %v, want the projection failed with at least the bad event and the two after it behind", gauges)
	}
	got, err := sink.Recorded(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The good events before it commit with their batch, or are rolled
	// back with it when the handler stops first; neither the bad event's
	// writes nor anything after it is ever kept.
	if len(got) > 0 && !slices.Equal(got, first) {
		t.Errorf("recorded %v, want at most the 3 before the bad event %v", got, bad)
	}
}

// A runner started while the database is away stops when told to, and one
// that stays follows the registry once the database is back: it starts the
// activity's handler and applies what was appended.
func testRunnerFollowsTheRegistryThroughAnOutage(t *testing.T) {
	t.Parallel()
	db, proxy := pgtest.NewBehindProxy(t)
	log := db.Log(postgres.LogConfig{PollInterval: 10 * time.Millisecond, RetryInterval: 10 * time.Millisecond})
	activity := user.ActivityProjection{Store: db.ActivityStore(), Log: db.Log(postgres.LogConfig{}), Keys: nil} // The events it applies carry no address.
	// following says when the runner, its router running, has failed to
	// read the registry at a tick.
	following := &signalWriter{want: "follow the registry of versions", seen: make(chan struct{})}
	logger := slog.New(slog.NewTextHandler(following, nil))
	run := func(ctx context.Context) (*async.Runner, <-chan error) {
		r, err := async.NewRunner(log, []projections.Projection{activity},
			async.WithFollowInterval(10*time.Millisecond), async.WithRunnerLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		return r, done
	}
	proxy.Down()

	ctx, cancel := context.WithCancel(t.Context())
	_, done := run(ctx)
	select {
	case <-following.seen:
	case err := <-done:
		t.Fatalf("Run returned while the database was away: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the runner did not try the registry again while the database was away")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a runner that never reached the registry did not stop when its context ended")
	}

	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	r, done := run(ctx)
	proxy.Up()
	id := uuid.New()
	registered, err := eventstore.NewEvent(user.TypeRegistered, user.Registered{UserID: id, Email: "ada@example.com"}, eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		_, err := db.Events().Append(ctx, tx, "user-"+id.String(), eventstore.Any, registered)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := activity.Behind(t.Context())
		if err == nil && n == 0 && len(r.Status()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the outage the activity is %d events behind (%v), status %+v", n, err, r.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// signalWriter closes seen once something written to it holds want.
type signalWriter struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// A database that is unavailable spends none of a projection's tries: an
// event that fails with uow.ErrUnavailable more often than the runner
// tries is applied once the database answers, and the projection runs on.
func testUnavailableDatabaseSpendsNoTries(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	sink := newApplied(t, db)
	want := appendEvents(t, db, "s-1", "test.good", 2)
	log := db.Log(postgres.LogConfig{PollInterval: 10 * time.Millisecond, ResendInterval: time.Millisecond})
	var mu sync.Mutex
	failures := 0
	p := unavailableFor{recording: recording{sink: sink}, times: 8, mu: &mu, failures: &failures}
	r, err := async.NewRunner(log, []projections.Projection{p}, async.WithMaxTries(3))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	awaitCaughtUp(t, log, r, p, 10*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failures != 8 {
		t.Errorf("the batch failed %d times, want 8", failures)
	}
	got, err := sink.Recorded(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("applied %v, want %v once each", got, want)
	}
}

// A connection that breaks under a batch spends none of a projection's
// tries either: the batch's transaction answers "driver: bad connection" to
// every resend until the subscriber gives it up at its ack deadline, and
// the next transaction, on a new connection, applies the batch. A
// PostgreSQL restart does this to every instance's subscribers at once.
func testBrokenConnectionSpendsNoTries(t *testing.T) {
	t.Parallel()
	db, proxy := pgtest.NewBehindProxy(t)
	sink := newApplied(t, db)
	want := appendEvents(t, db, "s-1", "test.good", 2)
	log := db.Log(postgres.LogConfig{PollInterval: 10 * time.Millisecond, ResendInterval: 10 * time.Millisecond,
		RetryInterval: 10 * time.Millisecond, AckDeadline: 500 * time.Millisecond})
	var once sync.Once
	p := breaksOnce{recording: recording{sink: sink}, once: &once, cut: func() {
		proxy.Down()
		time.AfterFunc(100*time.Millisecond, proxy.Up)
	}}
	r, err := async.NewRunner(log, []projections.Projection{p}, async.WithMaxTries(3))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	awaitCaughtUp(t, log, r, p, 20*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := sink.Recorded(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("applied %v, want %v once each", got, want)
	}
}

// breaksOnce is a recording projection that, the first time it applies,
// breaks every connection to the database before it writes.
type breaksOnce struct {
	recording
	once *sync.Once
	cut  func()
}

func (p breaksOnce) Apply(ctx context.Context, tx uow.Tx, events ...eventstore.Event) error {
	p.once.Do(p.cut)
	return p.recording.Apply(ctx, tx, events...)
}

// unavailableFor is a recording projection whose Apply fails with
// uow.ErrUnavailable the first times it is called.
type unavailableFor struct {
	recording
	times    int
	mu       *sync.Mutex
	failures *int
}

func (p unavailableFor) Apply(ctx context.Context, tx uow.Tx, events ...eventstore.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if *p.failures < p.times {
		*p.failures++
		return uow.Unavailable(fmt.Errorf("the database went away"))
	}
	return p.recording.Apply(ctx, tx, events...)
}

// awaitCaughtUp waits until p has applied every event of log, and fails
// t if r reports p failed, or if within passes first.
func awaitCaughtUp(t *testing.T, log async.Log, r *async.Runner, p projections.Projection, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, _, err := log.Behind(t.Context(), projections.Group(p), nil)
		if err == nil && n == 0 {
			return
		}
		if st := r.Status(); len(st) == 1 && st[0].State == async.StateFailed {
			t.Fatalf("the projection failed: %v", st[0].Err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d events behind (%v), status %+v", n, err, r.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
