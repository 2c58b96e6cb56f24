package httpapi

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// traceRequests makes a server span of each request through otelhttp, a
// child of the caller's span when the request carries a W3C traceparent.
// The API counts its requests itself (observeRequests), so otelhttp's own
// metrics go to a no-op meter.
//
// With tracing off (a provider of go.opentelemetry.io/otel/trace/noop) it
// makes no span and leaves otelhttp out, whose attributes and wrappers cost
// a few percent of a request's CPU for nothing; it still puts the caller's
// traceparent in the request's context, as the no-op tracer would, so that
// the outbox messages of the request pass it on.
func traceRequests(tp trace.TracerProvider, next http.Handler) http.Handler {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	propagator := propagation.TraceContext{}
	if _, off := tp.(tracenoop.TracerProvider); off {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(traceparentHeader) != "" {
				r = r.WithContext(propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
			}
			next.ServeHTTP(w, r)
		})
	}
	return otelhttp.NewHandler(next, "http",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagator),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()))
}

// traceparentHeader is the W3C header of the caller's trace.
const traceparentHeader = "Traceparent"

// nameSpans names the request's span for the route the mux matched, as
// "METHOD /route", and sets its http.route. It wraps the mux, behind only
// the client limit, which hands the request on as it is and sets the
// pattern of one it refuses: the mux sets the pattern on the request it is
// handed, which middleware that copies the request (r.WithContext) would
// hide from otelhttp.
func nameSpans(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		span := trace.SpanFromContext(r.Context())
		if !span.IsRecording() || r.Pattern == "" {
			return
		}
		route := routeOf(r.Pattern)
		span.SetName(r.Method + " " + route)
		span.SetAttributes(semconv.HTTPRoute(route))
	})
}

// routeOf is the path of a mux pattern such as "POST /v1/sessions".
func routeOf(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return pattern
}
