package telemetry

import (
	"context"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Options are what [New] needs besides the variables.
type Options struct {
	// Console is where the console exporter writes, such as the log's
	// output; nil discards.
	Console io.Writer
	// Version is the resource's service.version; "" leaves it out.
	Version string
	// TracesURL, when set, is where OTLP/HTTP spans go whatever the
	// variables say, for a receiver of the process's own (the benchmarks'
	// sink).
	TracesURL string
}

// Tracing is the tracer provider of a [Config], and what flushes it.
type Tracing struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider
}

// New builds the tracer provider that c describes: a no-op one when
// tracing is off, otherwise an SDK provider that batches its spans to the
// exporter c names. It connects to nothing yet: an OTLP receiver that
// cannot be reached costs a failed export later, not the start.
func New(ctx context.Context, c Config, o Options) (*Tracing, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if !c.Enabled() {
		return &Tracing{provider: noop.NewTracerProvider()}, nil
	}
	exp, err := newExporter(ctx, c, o)
	if err != nil {
		return nil, fmt.Errorf("telemetry: exporter: %w", err)
	}
	base := []resource.Option{resource.WithAttributes(semconv.ServiceName("accounts"))}
	if o.Version != "" {
		base = append(base, resource.WithAttributes(semconv.ServiceVersion(o.Version)))
	}
	// Detectors merge in order, the later winning: the environment's
	// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME over the defaults.
	res, err := resource.New(ctx, append(base, resource.WithTelemetrySDK(), resource.WithFromEnv())...)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	// The SDK reads OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG and the
	// batch processor's OTEL_BSP_* itself.
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{provider: sdk, sdk: sdk}, nil
}

func newExporter(ctx context.Context, c Config, o Options) (sdktrace.SpanExporter, error) {
	if c.Exporter == ExporterConsole {
		w := o.Console
		if w == nil {
			w = io.Discard
		}
		return stdouttrace.New(stdouttrace.WithWriter(w))
	}
	// Each OTLP exporter reads its endpoint, headers, TLS and timeout
	// from the OTEL_EXPORTER_OTLP_* variables.
	switch {
	case o.TracesURL != "":
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(o.TracesURL))
	case c.protocol() == ProtocolGRPC:
		return otlptracegrpc.New(ctx)
	}
	return otlptracehttp.New(ctx)
}

// TracerProvider returns the provider to hand to the service's parts.
func (t *Tracing) TracerProvider() trace.TracerProvider { return t.provider }

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t.sdk != nil }

// Shutdown exports the spans that have ended and not been exported yet,
// and stops the provider; ctx bounds how long that may take. A provider
// that was off has nothing to do.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}

// Propagator returns the W3C trace context and baggage propagator, for
// otel.SetTextMapPropagator.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}
