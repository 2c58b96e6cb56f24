package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/requestid"
)

// Origin is where a message came from: the W3C trace context of the span
// in which the unit of work added it, and the ID of the request that ran
// that unit of work. A store keeps it beside the message ([Store.Add]
// reads it from its context with [OriginFrom]) and hands it back with the
// message ([RelayStore.ClaimWithOrigins]), so that the relay's delivery
// joins the request's trace and its log lines name the request. It holds
// no personal data: an erasure, a redaction or a requeue leaves it as it
// is. The zero Origin is a message added outside any span and request.
type Origin struct {
	// TraceParent is the traceparent of the span, as W3C trace context
	// writes it; empty when the context held no valid span.
	TraceParent string `json:"traceparent,omitempty"`
	// TraceState is the span's tracestate; empty when it has none.
	TraceState string `json:"tracestate,omitempty"`
	// RequestID is [requestid.From] of the context; empty when none.
	RequestID string `json:"request_id,omitempty"`
}

// Claimed is a message as a claim returns it, with its origin.
type Claimed struct {
	Message
	Origin Origin
}

// Messages returns the messages of claimed, in order; nil for nil, so that
// a backend's Claim can be its ClaimWithOrigins without the origins.
func Messages(claimed []Claimed) []Message {
	if claimed == nil {
		return nil
	}
	msgs := make([]Message, len(claimed))
	for i, c := range claimed {
		msgs[i] = c.Message
	}
	return msgs
}

// traceContext is the propagator of origins. It is W3C trace context,
// whatever the process's global propagator is.
var traceContext = propagation.TraceContext{}

// OriginFrom returns the origin that ctx gives a message added under it:
// the trace context of its span, when the span is valid, and its request
// ID.
func OriginFrom(ctx context.Context) Origin {
	o := Origin{RequestID: requestid.From(ctx)}
	if trace.SpanContextFromContext(ctx).IsValid() {
		traceContext.Inject(ctx, originCarrier{&o})
	}
	return o
}

// IsZero reports whether o holds nothing.
func (o Origin) IsZero() bool { return o == Origin{} }

// SpanContext returns the span context that o's trace context names,
// marked remote; it is not valid when o names none, or names one that W3C
// trace context does not accept.
func (o Origin) SpanContext() trace.SpanContext {
	if o.TraceParent == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(traceContext.Extract(context.Background(), originCarrier{&o}))
}

// EncodeOrigin returns o as the backends store it, JSON, or nil for the
// zero Origin, which they store as NULL.
func EncodeOrigin(o Origin) ([]byte, error) {
	if o.IsZero() {
		return nil, nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("outbox: encode origin: %w", err)
	}
	return b, nil
}

// DecodeOrigin returns the origin that [EncodeOrigin] made of b; empty b
// (NULL) is the zero Origin. Its error is meant for a store to wrap with
// what it was doing ("outbox: claim ID: decode origin: ..."), so it does
// not begin with the package's name.
func DecodeOrigin(b []byte) (Origin, error) {
	var o Origin
	if len(b) == 0 {
		return o, nil
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return Origin{}, fmt.Errorf("decode origin: %w", err)
	}
	return o, nil
}

// originCarrier is the [propagation.TextMapCarrier] of an Origin's two
// trace context fields, so that injecting and extracting need no map.
type originCarrier struct{ o *Origin }

const (
	headerTraceParent = "traceparent"
	headerTraceState  = "tracestate"
)

func (c originCarrier) Get(key string) string {
	switch key {
	case headerTraceParent:
		return c.o.TraceParent
	case headerTraceState:
		return c.o.TraceState
	}
	return ""
}

func (c originCarrier) Set(key, value string) {
	switch key {
	case headerTraceParent:
		c.o.TraceParent = value
	case headerTraceState:
		c.o.TraceState = value
	}
}

func (c originCarrier) Keys() []string { return []string{headerTraceParent, headerTraceState} }
