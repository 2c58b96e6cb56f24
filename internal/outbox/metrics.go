package outbox

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// meterName is the instrumentation scope of the relay's metrics.
const meterName = "github.com/eventsourced/accounts/internal/outbox"

// relayMetrics are the relay's instruments. The seed names outbox.delivered
// and outbox.buried; alert on outbox.buried, and on outbox.oldest_due_age,
// which grows while a relay is stuck, before anything is buried.
type relayMetrics struct {
	meter     metric.Meter
	delivered metric.Int64Counter
	retried   metric.Int64Counter
	buried    metric.Int64Counter
}

func newRelayMetrics(mp metric.MeterProvider) (*relayMetrics, error) {
	m := &relayMetrics{meter: mp.Meter(meterName)}
	var err error
	if m.delivered, err = m.meter.Int64Counter("outbox.delivered",
		metric.WithDescription("Messages delivered by their handler."),
		metric.WithUnit("{message}")); err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	if m.retried, err = m.meter.Int64Counter("outbox.retried",
		metric.WithDescription("Deliveries that failed and were scheduled again."),
		metric.WithUnit("{message}")); err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	if m.buried, err = m.meter.Int64Counter("outbox.buried",
		metric.WithDescription("Messages the relay stopped delivering and kept for an operator."),
		metric.WithUnit("{message}")); err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	return m, nil
}

// observeBacklog reports the age of the longest-due message whenever the
// metrics are collected, if the store can tell it, until the returned
// function is called.
func (m *relayMetrics) observeBacklog(store Store, now func() time.Time) (func(), error) {
	insp, ok := store.(Inspector)
	if !ok {
		return func() {}, nil
	}
	gauge, err := m.meter.Float64ObservableGauge("outbox.oldest_due_age",
		metric.WithDescription("How long the longest-due message has waited; 0 when none is due."),
		metric.WithUnit("s"))
	if err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		t := now()
		due, ok, err := insp.OldestDue(ctx, t)
		if err != nil {
			return err
		}
		age := 0.0
		if ok {
			age = max(t.Sub(due).Seconds(), 0)
		}
		o.ObserveFloat64(gauge, age)
		return nil
	}, gauge)
	if err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	return func() { _ = reg.Unregister() }, nil
}

func topicAttr(topic string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("topic", topic))
}
