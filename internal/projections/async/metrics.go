package async

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/eventsourced/accounts/internal/projections"
)

// meterName is the instrumentation scope of the runner's metrics: the
// projections' import path, as it was before the runner had a package of
// its own, so that its metrics and spans keep their scope.
const meterName = "github.com/eventsourced/accounts/internal/projections"

// behindTimeout bounds the store call behind the lag gauges.
const behindTimeout = 2 * time.Second

// runnerMetrics are a [Runner]'s instruments, by projection (its group):
// events applied and the time each took, how many events and how many
// seconds the projection is behind the log, and its state (0 running,
// 1 failed, 2 rebuilding beside the version that serves). Alert on
// projections.state equal to 1 and on projections.behind.seconds growing
// for a version that is running.
type runnerMetrics struct {
	applied  metric.Int64Counter
	duration metric.Float64Histogram

	mu     sync.Mutex
	groups map[string]metric.MeasurementOption
}

// track makes the instruments report group from now on.
func (m *runnerMetrics) track(group string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.groups[group]; ok {
		return
	}
	m.groups[group] = metric.WithAttributeSet(attribute.NewSet(attribute.String("projection", group)))
	m.applied.Add(context.Background(), 0, m.groups[group])
}

// of returns the attributes of group's measurements.
func (m *runnerMetrics) of(group string) metric.MeasurementOption {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.groups[group]
}

func newRunnerMetrics(mp metric.MeterProvider, r *Runner) (*runnerMetrics, func(), error) {
	meter := mp.Meter(meterName)
	m := &runnerMetrics{groups: make(map[string]metric.MeasurementOption, len(r.projs))}
	var err error
	if m.applied, err = meter.Int64Counter("projections.applied",
		metric.WithDescription("Events applied by each projection."), metric.WithUnit("{event}")); err != nil {
		return nil, nil, fmt.Errorf("projections: metrics: %w", err)
	}
	if m.duration, err = meter.Float64Histogram("projections.apply.duration",
		metric.WithDescription("Time one event took to apply, by projection."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)); err != nil {
		return nil, nil, fmt.Errorf("projections: metrics: %w", err)
	}
	events, err := meter.Int64ObservableGauge("projections.behind.events",
		metric.WithDescription("Events of its types the projection has still to apply."), metric.WithUnit("{event}"))
	if err != nil {
		return nil, nil, fmt.Errorf("projections: metrics: %w", err)
	}
	seconds, err := meter.Float64ObservableGauge("projections.behind.seconds",
		metric.WithDescription("Age of the oldest event the projection has still to apply; 0 when caught up."), metric.WithUnit("s"))
	if err != nil {
		return nil, nil, fmt.Errorf("projections: metrics: %w", err)
	}
	state, err := meter.Int64ObservableGauge("projections.state",
		metric.WithDescription("State of each projection version: 0 running, 1 failed, 2 rebuilding."))
	if err != nil {
		return nil, nil, fmt.Errorf("projections: metrics: %w", err)
	}
	type lag struct {
		events int64
		oldest time.Time
	}
	var mu sync.Mutex
	last := make(map[string]lag, len(r.projs))
	reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		now := r.now()
		mu.Lock()
		defer mu.Unlock()
		for _, st := range r.kept() {
			g := st.Group
			bctx, cancel := context.WithTimeout(ctx, behindTimeout)
			n, oldest, err := r.log.Behind(bctx, g, st.types)
			cancel()
			if err == nil || errors.Is(err, projections.ErrLogOrder) {
				last[g] = lag{n, oldest}
			}
			l := last[g]
			attrs := m.of(g)
			o.ObserveInt64(events, l.events, attrs)
			age := 0.0
			if !l.oldest.IsZero() {
				age = max(now.Sub(l.oldest).Seconds(), 0)
			}
			o.ObserveFloat64(seconds, age, attrs)
			code := int64(0)
			switch st.State {
			case StateFailed:
				code = 1
			case StateRebuilding:
				code = 2
			}
			o.ObserveInt64(state, code, attrs)
		}
		return nil
	}, events, seconds, state)
	if err != nil {
		return nil, nil, fmt.Errorf("projections: metrics: %w", err)
	}
	return m, func() { _ = reg.Unregister() }, nil
}
