package main

import (
	"context"
	"io"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/eventsourced/accounts/internal/telemetry"
)

// tracingFlush bounds the last export of spans once a command ends.
const tracingFlush = 5 * time.Second

// startTracing builds the tracer provider of the OTEL_ variables into
// e.tracer. When tracing is on it also becomes the global provider, with
// the W3C trace context and baggage as the global propagator, for
// libraries that take no provider; when it is off nothing global changes.
// Its spans of the console exporter go to console. stop exports what is
// left, waiting at most tracingFlush.
func (e *env) startTracing(ctx context.Context, console io.Writer) (stop func(), err error) {
	t, stop, err := e.buildTracing(ctx, telemetry.Options{Console: console})
	if err != nil || !t.Enabled() {
		return stop, err
	}
	otel.SetTracerProvider(t.TracerProvider())
	otel.SetTextMapPropagator(telemetry.Propagator())
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { e.log.Warn("tracing", "error", err) }))
	return stop, nil
}

// buildTracing builds the tracer provider of the OTEL_ variables and the
// options o into e.tracer, changing nothing global. stop exports what is
// left, waiting at most tracingFlush.
func (e *env) buildTracing(ctx context.Context, o telemetry.Options) (t *telemetry.Tracing, stop func(), err error) {
	o.Version = version()
	t, err = telemetry.New(ctx, e.cfg.Tracing, o)
	if err != nil {
		return nil, nil, err
	}
	e.tracer = t.TracerProvider()
	if !t.Enabled() {
		return t, func() {}, nil
	}
	e.log.Info("tracing on", "tracing", e.cfg.Tracing.InEffect())
	return t, func() {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlush)
		defer cancel()
		if err := t.Shutdown(flush); err != nil {
			e.log.Warn("tracing: last export", "error", err)
		}
	}, nil
}
