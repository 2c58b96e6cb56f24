// Package telemetry builds the service's tracer provider from the standard
// OpenTelemetry environment variables.
//
// Tracing is off unless OTEL_TRACES_EXPORTER names an exporter: with it
// unset or "none", [New] returns a no-op provider, whose spans record
// nothing and cost next to nothing. "otlp" exports over OTLP, by
// OTEL_EXPORTER_OTLP_PROTOCOL (or its _TRACES_ form) "http/protobuf" (the
// default) or "grpc"; "console" writes each span as JSON to the writer it
// is given. This is the opposite of the OpenTelemetry default, which is
// otlp: a service that nobody set up to export should not try to reach a
// collector on every batch.
//
// [Config] lists every variable for `app config` and checks the values
// that choose the exporter and the sampler, so that a typo stops the start.
// The rest is read where OpenTelemetry's users expect it to be read, from
// the process's environment by the SDK and the exporters themselves: the
// endpoint and headers by otlptracehttp and otlptracegrpc, the sampler by
// the SDK's tracer provider, the batch span processor's OTEL_BSP_* by the
// batch span processor, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// by the resource, over a service.name of "accounts", and
// OTEL_METRICS_EXEMPLAR_FILTER by the metrics SDK (which the app sets to
// always_off while tracing is off).
//
// [Propagator] is the W3C trace context with baggage, for the global
// propagator; components that carry a trace context name
// propagation.TraceContext themselves.
package telemetry
