package relay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/eventsourced/accounts/internal/outbox"
)

// meterName is the instrumentation scope of the relay's metrics: the
// outbox's, as it was before the relay had a package of its own, so that
// the metrics keep their scope.
const meterName = "github.com/eventsourced/accounts/internal/outbox"

// backlogTimeout bounds the store call behind the backlog gauges, so that a
// database that does not answer cannot hold a scrape.
const backlogTimeout = 2 * time.Second

// Store operations, as the outbox.store.errors counter names them.
const (
	opClaim   = "claim"
	opAck     = "ack"
	opRetry   = "retry"
	opBury    = "bury"
	opRelease = "release"
	opBacklog = "backlog"
)

// relayMetrics are the relay's instruments. The seed names outbox.delivered
// and outbox.buried; alert on an increase of outbox.buried, on
// outbox.oldest_due_age, which grows while deliveries are stuck before
// anything is buried, on outbox.breaker.state above 0, and on
// outbox.store.errors. The counters of every topic that has a handler exist
// at 0 from the start, so that an alert on their increase sees the first
// one after a restart.
type relayMetrics struct {
	meter     metric.Meter
	delivered metric.Int64Counter
	retried   metric.Int64Counter
	buried    metric.Int64Counter
	leaseLost metric.Int64Counter
	overran   metric.Int64Counter
	taken     metric.Int64Counter
	storeErrs metric.Int64Counter
	duration  metric.Float64Histogram

	// topics holds the attribute options of the handlers' topics, made
	// once, so that recording one delivery allocates nothing for them.
	topics   map[string]metric.MeasurementOption
	outcomes map[string]map[string]metric.MeasurementOption
	ops      map[string]metric.MeasurementOption
}

func newRelayMetrics(mp metric.MeterProvider, topics []string) (*relayMetrics, error) {
	m := &relayMetrics{
		meter:    mp.Meter(meterName),
		topics:   make(map[string]metric.MeasurementOption, len(topics)),
		outcomes: make(map[string]map[string]metric.MeasurementOption, len(topics)),
		ops:      make(map[string]metric.MeasurementOption),
	}
	counters := []struct {
		c          *metric.Int64Counter
		name, desc string
	}{
		{&m.delivered, "outbox.delivered", "Messages delivered by their handler."},
		{&m.retried, "outbox.retried", "Deliveries that failed and were scheduled again."},
		{&m.buried, "outbox.buried", "Messages the relay stopped delivering and kept for an operator."},
		{&m.leaseLost, "outbox.lease_lost", "Outcomes not recorded because the message was claimed again meanwhile."},
		{&m.overran, "outbox.overran", "Handlers still running when the lease of their message ended."},
		{&m.taken, "outbox.taken", "Messages the relay took from the units of work of its process, without claiming them."},
	}
	for _, c := range counters {
		var err error
		if *c.c, err = m.meter.Int64Counter(c.name, metric.WithDescription(c.desc), metric.WithUnit("{message}")); err != nil {
			return nil, fmt.Errorf("outbox: metrics: %w", err)
		}
	}
	var err error
	if m.storeErrs, err = m.meter.Int64Counter("outbox.store.errors",
		metric.WithDescription("Store calls of the relay that failed, by operation."),
		metric.WithUnit("{error}")); err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	if m.duration, err = m.meter.Float64Histogram("outbox.delivery.duration",
		metric.WithDescription("Time a handler took for one delivery, by topic and outcome."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)); err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	ctx := context.Background()
	for _, t := range topics {
		opt := m.topic(t)
		m.topics[t] = opt
		for _, c := range []metric.Int64Counter{m.delivered, m.retried, m.buried, m.leaseLost, m.overran, m.taken} {
			c.Add(ctx, 0, opt)
		}
		m.outcomes[t] = make(map[string]metric.MeasurementOption, 3)
		for _, o := range []string{outcomeDelivered, outcomeRetried, outcomeBuried} {
			m.outcomes[t][o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", t), attribute.String("outcome", o)))
		}
	}
	for _, op := range []string{opClaim, opAck, opRetry, opBury, opRelease, opBacklog} {
		m.ops[op] = metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", op)))
		m.storeErrs.Add(ctx, 0, m.ops[op])
	}
	return m, nil
}

// topic returns the attribute option of topic.
func (m *relayMetrics) topic(t string) metric.MeasurementOption {
	if opt, ok := m.topics[t]; ok {
		return opt
	}
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", t)))
}

// observeDuration records how long one delivery of topic took and how it
// ended. ctx carries the delivery's span, which the measurement's exemplar
// names when the span is sampled.
func (m *relayMetrics) observeDuration(ctx context.Context, topic, outcome string, d time.Duration) {
	byOutcome := m.outcomes[topic]
	opt, ok := byOutcome[outcome]
	if !ok {
		opt = metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", topic), attribute.String("outcome", outcome)))
	}
	m.duration.Record(ctx, d.Seconds(), opt)
}

// countTaken counts the messages of hs, taken from the [outbox.Handover], by
// topic.
func (m *relayMetrics) countTaken(hs []*held) {
	ctx := context.Background()
	for _, h := range hs {
		m.taken.Add(ctx, 1, m.topic(h.msg.Topic))
	}
}

// storeError counts a failed store call of op.
func (m *relayMetrics) storeError(ctx context.Context, op string) {
	m.storeErrs.Add(context.WithoutCancel(ctx), 1, m.ops[op])
}

// observe reports, whenever the metrics are collected, the state of each
// topic's breaker and the store's backlog, until the returned function is
// called. When the store cannot be read, the backlog
// gauges keep their last values (the age of the oldest due message goes on
// growing from it) and the error is counted, so that alerts on them never
// stop evaluating.
func (m *relayMetrics) observe(store outbox.RelayStore, now func() time.Time, b *breakers) (func(), error) {
	state, err := m.meter.Int64ObservableGauge("outbox.breaker.state",
		metric.WithDescription("State of each topic's circuit breaker: 0 closed, 1 half-open (probing), 2 open."))
	if err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	observables := []metric.Observable{state}
	ls, listens := store.(outbox.Listener)
	var listening metric.Int64ObservableGauge
	if listens {
		if listening, err = m.meter.Int64ObservableGauge("outbox.wakeups.listening",
			metric.WithDescription("1 while commits of other processes wake the relay at once; 0 while it finds them only at its next poll (OUTBOX_INTERVAL).")); err != nil {
			return nil, fmt.Errorf("outbox: metrics: %w", err)
		}
		observables = append(observables, listening)
	}
	due, err := m.meter.Int64ObservableGauge("outbox.backlog.due",
		metric.WithDescription("Messages due now, not buried."), metric.WithUnit("{message}"))
	if err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	buried, err := m.meter.Int64ObservableGauge("outbox.backlog.buried",
		metric.WithDescription("Messages buried now, kept for an operator."), metric.WithUnit("{message}"))
	if err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	age, err := m.meter.Float64ObservableGauge("outbox.oldest_due_age",
		metric.WithDescription("How long the longest-due message has waited; 0 when none is due."),
		metric.WithUnit("s"))
	if err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	observables = append(observables, due, buried, age)
	var mu sync.Mutex
	var last outbox.Backlog
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for topic, s := range b.states() {
			o.ObserveInt64(state, int64(s), m.topic(topic))
		}
		if listens {
			v := int64(0)
			if ls.Listening() {
				v = 1
			}
			o.ObserveInt64(listening, v)
		}
		t := now()
		rctx, cancel := context.WithTimeout(ctx, backlogTimeout)
		got, err := store.Backlog(rctx, t)
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			m.storeError(ctx, opBacklog)
		} else {
			last = got
		}
		o.ObserveInt64(due, last.Due)
		o.ObserveInt64(buried, last.Buried)
		a := 0.0
		if !last.OldestDue.IsZero() {
			a = max(t.Sub(last.OldestDue).Seconds(), 0)
		}
		o.ObserveFloat64(age, a)
		return nil
	}, observables...)
	if err != nil {
		return nil, fmt.Errorf("outbox: metrics: %w", err)
	}
	return func() { _ = reg.Unregister() }, nil
}
