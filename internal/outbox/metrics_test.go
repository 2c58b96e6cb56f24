package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/eventsourced/accounts/internal/outbox"
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
			}
		}
	}
	return got
}

func TestRelayCountsOutcomesByTopic(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	f := newFixture(t, outbox.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	failing := f.add(t, "mail")
	f.add(t, "mail")
	f.add(t, "sms")
	f.handle = func(_ context.Context, m outbox.Message) error {
		if m.ID == failing.ID {
			return errors.New("421 busy")
		}
		return nil
	}
	f.drain(t)

	got := collect(t, reader)
	for name, want := range map[string]map[string]float64{
		"outbox.delivered": {"mail": 1},
		"outbox.retried":   {"mail": 1},
		"outbox.buried":    {"sms": 1},
	} {
		for topic, v := range want {
			if got[name][topic] != v {
				t.Errorf("%s{topic=%q} = %v, want %v (all: %v)", name, topic, got[name][topic], v, got)
			}
		}
	}
}

// The age of the oldest due message grows while nothing delivers it, which
// is how an operator sees a stuck relay before anything is buried.
func TestRelayReportsTheAgeOfTheOldestDueMessage(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	f := newFixture(t, outbox.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
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
