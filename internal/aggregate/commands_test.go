package aggregate_test

import (
	"context"
	"errors"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/eventsourced/accounts/internal/aggregate"
	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/uow"
)

var errRefused = errors.New("counter: refused")

// TestCommands runs commands on PostgreSQL through the layer: a lost race is
// run again, a refusal and a failure are told apart, and each outcome is
// recorded on the command's span and in its metric.
func TestCommands(t *testing.T) {
	db := pgtest.New(t)
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	cmds, err := aggregate.NewCommands(aggregate.CommandsConfig{
		Domain: "counter", Instrumentation: "example/counter", Runner: db.Runner(nil),
		Refusals:       []aggregate.Refusal{{Err: errRefused, Name: "counter.ErrRefused"}},
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := requestid.With(t.Context(), "req-1")

	// The first try loses a race: another unit of work appends to the
	// stream between its load and its append.
	tries := 0
	err = cmds.Do(ctx, "counter.Add", func(ctx context.Context, tx uow.Tx) error {
		tries++
		events, err := db.Events().Load(ctx, tx, "counter-1", 0)
		if err != nil {
			return err
		}
		if tries == 1 {
			if err := db.Runner(nil).Do(context.Background(), func(ctx context.Context, tx2 uow.Tx) error {
				_, err := db.Events().Append(ctx, tx2, "counter-1", eventstore.Any, newEvent(t, ctx))
				return err
			}); err != nil {
				return err
			}
		}
		e := newEvent(t, ctx)
		if md := e.Metadata; md.CorrelationID != "req-1" || md.CausationID != "counter.Add" {
			t.Errorf("an event made in the command has metadata %+v, want its request and command", md)
		}
		_, err = db.Events().Append(ctx, tx, "counter-1", eventstore.Exactly(int64(len(events))), e)
		return err
	})
	if err != nil || tries != 2 {
		t.Fatalf("Do: %v after %d tries, want success on the second", err, tries)
	}
	if err := cmds.Do(ctx, "counter.Add", func(context.Context, uow.Tx) error { return errRefused }); !errors.Is(err, errRefused) {
		t.Fatalf("a refusal: %v", err)
	}
	if err := cmds.Read(ctx, "counter.Get", func(context.Context, uow.Tx) error { return errors.New("disk on fire") }); err == nil {
		t.Fatal("a failed query returned no error")
	}

	ended := spans.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans, want 3", len(ended))
	}
	for i, want := range []string{"", "counter.ErrRefused", "*errors.errorString"} {
		var got string
		for _, a := range ended[i].Attributes() {
			if a.Key == "error.type" {
				got = a.Value.AsString()
			}
		}
		if got != want {
			t.Errorf("span %s: error.type %q, want %q", ended[i].Name(), got, want)
		}
	}
	if evs := ended[0].Events(); len(evs) != 1 || evs[0].Name != aggregate.EventLostRace {
		t.Errorf("the first command's span has events %v, want one lost race", evs)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "counter.command.duration" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				command, _ := dp.Attributes.Value("command")
				outcome, _ := dp.Attributes.Value("outcome")
				outcomes[command.AsString()+" "+outcome.AsString()] += dp.Count
			}
		}
	}
	want := map[string]uint64{"counter.Add ok": 1, "counter.Add refused": 1, "counter.Get failed": 1}
	if len(outcomes) != len(want) {
		t.Errorf("counter.command.duration counted %v, want %v", outcomes, want)
	}
	for k, n := range want {
		if outcomes[k] != n {
			t.Errorf("counter.command.duration counted %v, want %v", outcomes, want)
		}
	}
}

func newEvent(t *testing.T, ctx context.Context) eventstore.Event {
	t.Helper()
	e, err := eventstore.NewEvent("counter.added", map[string]int{"n": 1}, aggregate.Metadata(ctx))
	if err != nil {
		t.Fatal(err)
	}
	return e
}
