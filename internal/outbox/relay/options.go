package relay

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures a [Relay].
type Option func(*Relay)

// WithClock makes the relay read the time from now instead of time.Now.
func WithClock(now func() time.Time) Option {
	return func(r *Relay) { r.now = now }
}

// WithLogger makes the relay log to l instead of discarding its logs.
func WithLogger(l *slog.Logger) Option {
	return func(r *Relay) { r.log = l }
}

// WithMeterProvider makes the relay record its metrics with mp.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(r *Relay) { r.meter = mp }
}

// WithTracerProvider makes the relay's spans, one per delivery, with tp;
// without it, or with nil, otel.GetTracerProvider() makes them. A no-op
// provider of go.opentelemetry.io/otel/trace/noop turns them off: the
// relay then starts no span at all, which saves a tenth of its CPU in a
// drain.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(r *Relay) { r.tp = tp }
}

// WithStopGrace bounds how long the deliveries in flight may go on once the
// context of [Relay.Run] has ended: past d, their handlers' contexts end too.
// A delivery that then fails, as a handler whose context ended does, is
// released, like a message claimed and never handed over: it is due again at
// once and the attempt its claim counted is given back, so a stop spends no
// attempt. One that succeeds is acknowledged. A handler that ignores its
// context past d and [outbox.SettleTimeout] more is left behind, its message
// leased until its lease ends, and Run returns without it. Without this
// option, or with d zero, deliveries in flight have their whole
// [outbox.RelayConfig.Timeout].
func WithStopGrace(d time.Duration) Option {
	return func(r *Relay) { r.stopGrace = max(d, 0) }
}
