package relay_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// collect returns each metric's data points as value by topic; the gauge,
// which has no topic, is under "".
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = map[string]float64{}
			topic := func(s attribute.Set) string {
				v, _ := s.Value("topic")
				return v.AsString()
			}
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					got[m.Name][topic(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range data.DataPoints {
					got[m.Name][topic(p.Attributes)] = p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range data.DataPoints {
					got[m.Name][topic(p.Attributes)] = float64(p.Value)
				}
			}
		}
	}
	return got
}

// meter returns a relay option that records metrics to a reader the test
// collects.
func meter() (relay.Option, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	return relay.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))), reader
}

// collectBy returns the data points of one metric by the value of one
// attribute.
func collectBy(t *testing.T, reader *sdkmetric.ManualReader, name, key string) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					v, _ := p.Attributes.Value(attribute.Key(key))
					got[v.AsString()] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range data.DataPoints {
					v, _ := p.Attributes.Value(attribute.Key(key))
					got[v.AsString()] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					v, _ := p.Attributes.Value(attribute.Key(key))
					got[v.AsString()] += float64(p.Count)
				}
			}
		}
	}
	return got
}

// TestRelayMetrics checks the relay's counters and gauges.
func TestRelayMetrics(t *testing.T) {
	t.Run("count outcomes by topic", testRelayCountsOutcomesByTopic)
	t.Run("report the age of the oldest due message", testRelayReportsTheAgeOfTheOldestDueMessage)
	t.Run("exist at zero from the start", testRelayMetricsExistAtZeroFromTheStart)
	t.Run("of every topic exist at zero from the start", testEveryTopicCounterExistsAtZeroFromTheStart)
	t.Run("gauges keep reporting while the database is away", testRelayGaugesKeepReportingWhileTheDatabaseIsAway)
	t.Run("durations name their deliveries in exemplars", testRelayDurationsNameTheirDeliveries)
}

// Each delivery's duration is recorded in its span's context, retried as
// well as delivered, so that the metrics SDK keeps the span's trace as an
// exemplar.
func testRelayDurationsNameTheirDeliveries(t *testing.T) {
	opt, reader := meter()
	f := newTraced(t, outbox.RelayConfig{MaxAttempts: 3}, opt)
	failures := 1
	f.handle = func(context.Context, outbox.Message) error {
		if failures > 0 {
			failures--
			return errors.New("421 busy")
		}
		return nil
	}
	f.request(t, "req-timed")
	f.drain(t)
	f.now = f.now.Add(outbox.Backoff(1))
	f.drain(t)
	spans := f.deliveries(t)
	if len(spans) != 2 {
		t.Fatalf("%d delivery spans, want 2", len(spans))
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	// The span of each outcome, and the exemplars recorded under it.
	want := map[string]trace.SpanContext{"retried": spans[0].SpanContext(), "delivered": spans[1].SpanContext()}
	got := map[string][]metricdata.Exemplar[float64]{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if m.Name != "outbox.delivery.duration" || !ok {
				continue
			}
			for _, p := range h.DataPoints {
				outcome, _ := p.Attributes.Value("outcome")
				got[outcome.AsString()] = append(got[outcome.AsString()], p.Exemplars...)
			}
		}
	}
	for outcome, sc := range want {
		es := got[outcome]
		if len(es) != 1 || hex.EncodeToString(es[0].TraceID) != sc.TraceID().String() ||
			hex.EncodeToString(es[0].SpanID) != sc.SpanID().String() {
			t.Errorf("outbox.delivery.duration{outcome=%q}: exemplars %+v, want one of the span %s/%s", outcome, es, sc.TraceID(), sc.SpanID())
		}
	}
}

func testRelayCountsOutcomesByTopic(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	f := newFixture(t, relay.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	failing := f.add(t, "mail")
	refused := f.add(t, "mail")
	f.add(t, "mail")
	f.add(t, "sms") // No handler: left alone, counted nowhere.
	f.handle = func(_ context.Context, m outbox.Message) error {
		switch m.ID {
		case failing.ID:
			return errors.New("421 busy")
		case refused.ID:
			return fmt.Errorf("550 5.1.1 no such mailbox: %w", outbox.ErrPermanent)
		}
		return nil
	}
	f.drain(t)

	got := collect(t, reader)
	for name, want := range map[string]map[string]float64{
		"outbox.delivered": {"mail": 1},
		"outbox.retried":   {"mail": 1},
		"outbox.buried":    {"mail": 1},
	} {
		for topic, v := range want {
			if got[name][topic] != v {
				t.Errorf("%s{topic=%q} = %v, want %v (all: %v)", name, topic, got[name][topic], v, got)
			}
		}
		if v, ok := got[name]["sms"]; ok {
			t.Errorf("%s{topic=\"sms\"} = %v, want no series for a topic without handler", name, v)
		}
	}
}

// The age of the oldest due message grows while nothing delivers it, which
// is how an operator sees a stuck relay before anything is buried.
func testRelayReportsTheAgeOfTheOldestDueMessage(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	f := newFixture(t, relay.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if got := collect(t, reader)["outbox.oldest_due_age"][""]; got != 0 {
		t.Errorf("age with an empty outbox = %v, want 0", got)
	}
	f.add(t, "mail")
	f.now = f.now.Add(90 * time.Second)
	if got := collect(t, reader)["outbox.oldest_due_age"][""]; got != 90 {
		t.Errorf("age of a message due 90s ago = %v, want 90", got)
	}
	f.drain(t)
	if got := collect(t, reader)["outbox.oldest_due_age"][""]; got != 0 {
		t.Errorf("age after delivery = %v, want 0", got)
	}
}

// An alert on the increase of a counter sees the first burial after a
// restart only if the counter exists, at 0, before it: every topic that has
// a handler has its counters from the first scrape, and so has every store
// operation its error counter.
func testRelayMetricsExistAtZeroFromTheStart(t *testing.T) {
	opt, reader := meter()
	newFixture(t, opt)
	got := collect(t, reader)
	for _, name := range []string{"outbox.delivered", "outbox.retried", "outbox.buried"} {
		v, ok := got[name]["mail"]
		if !ok || v != 0 {
			t.Errorf("%s{topic=mail} = %v (present %t), want 0 from the start; all: %v", name, v, ok, got[name])
		}
	}
	ops := collectBy(t, reader, "outbox.store.errors", "operation")
	for _, op := range []string{"claim", "ack", "retry", "bury", "backlog"} {
		if v, ok := ops[op]; !ok || v != 0 {
			t.Errorf("outbox.store.errors{operation=%s} = %v (present %t), want 0", op, v, ok)
		}
	}
	if got["outbox.backlog.due"][""] != 0 || got["outbox.backlog.buried"][""] != 0 {
		t.Errorf("backlog of an empty outbox: %v, %v", got["outbox.backlog.due"], got["outbox.backlog.buried"])
	}
}

// outbox.overran and outbox.lease_lost, the counters an operator alerts on
// for the first two promises of a Relay, exist at 0 from the first scrape,
// as delivered, retried and buried do, so that an alert on their increase
// sees the first one after a restart.
func testEveryTopicCounterExistsAtZeroFromTheStart(t *testing.T) {
	opt, reader := meter()
	newFixture(t, opt)
	got := collect(t, reader)
	for _, name := range []string{"outbox.overran", "outbox.lease_lost"} {
		if v, ok := got[name]["mail"]; !ok || v != 0 {
			t.Errorf("%s{topic=mail} = %v (present %t), want 0 from the first scrape", name, v, ok)
		}
	}
}

// The gauges count what is due and buried now, and keep reporting while
// the database is away, with the age of the oldest due message still
// growing, and each failed store call counted by operation; once the
// database is back the relay delivers and the gauges follow.
func testRelayGaugesKeepReportingWhileTheDatabaseIsAway(t *testing.T) {
	t.Parallel()
	db, proxy := pgtest.NewBehindProxy(t)
	now := epoch
	clock := func() time.Time { return now }
	store := db.Outbox()
	opt, reader := meter()
	rel, err := relay.New(store, map[string]outbox.Handler{
		"mail": func(context.Context, outbox.Message) error { return errors.New("451 4.3.0 try again later") },
	}, outbox.RelayConfig{MaxAttempts: 1}, relay.WithClock(clock), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	add := func() {
		t.Helper()
		commit(t, db.Runner(clock), store, "mail", 1)
	}
	add()
	add()
	if _, err := rel.Drain(t.Context()); err != nil { // Both buried.
		t.Fatal(err)
	}
	add()
	now = now.Add(30 * time.Second)
	got := collect(t, reader)
	if got["outbox.backlog.due"][""] != 1 || got["outbox.backlog.buried"][""] != 2 || got["outbox.oldest_due_age"][""] != 30 {
		t.Fatalf("due %v, buried %v, oldest age %v; want 1, 2, 30",
			got["outbox.backlog.due"], got["outbox.backlog.buried"], got["outbox.oldest_due_age"])
	}
	if n := collectBy(t, reader, "outbox.delivery.duration", "outcome")["buried"]; n != 2 {
		t.Errorf("delivery durations recorded for burials: %v, want 2", n)
	}

	proxy.Down()
	now = now.Add(time.Minute)
	if _, err := rel.Drain(t.Context()); err == nil {
		t.Fatal("Drain with the database away succeeded")
	}
	got = collect(t, reader)
	if got["outbox.backlog.due"][""] != 1 || got["outbox.backlog.buried"][""] != 2 || got["outbox.oldest_due_age"][""] != 90 {
		t.Errorf("with the database away: due %v, buried %v, oldest age %v; want the last counts and an age of 90",
			got["outbox.backlog.due"], got["outbox.backlog.buried"], got["outbox.oldest_due_age"])
	}
	errs := collectBy(t, reader, "outbox.store.errors", "operation")
	if errs["claim"] < 1 || errs["backlog"] < 1 {
		t.Errorf("store errors %v, want the failed claim and backlog counted", errs)
	}

	proxy.Up()
	if _, err := rel.Drain(t.Context()); err != nil {
		t.Fatalf("Drain once the database is back: %v", err)
	}
	got = collect(t, reader)
	if got["outbox.backlog.due"][""] != 0 || got["outbox.backlog.buried"][""] != 3 || got["outbox.oldest_due_age"][""] != 0 {
		t.Errorf("once back: due %v, buried %v, oldest age %v; want 0, 3, 0",
			got["outbox.backlog.due"], got["outbox.backlog.buried"], got["outbox.oldest_due_age"])
	}
}
