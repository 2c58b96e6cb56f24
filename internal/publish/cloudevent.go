package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// ContentType is the media type of a CloudEvent in structured JSON mode.
const ContentType = "application/cloudevents+json"

// SpecVersion is the CloudEvents version of [CloudEvent].
const SpecVersion = "1.0"

// CloudEvent is an integration event in the CloudEvents 1.0 JSON format:
// the required attributes, the optional ones this service sets, and the
// data as JSON. It is written by hand rather than with the CloudEvents SDK:
// the format is these eight fields, and what the SDK adds, its protocol
// bindings and clients, Watermill's publishers already do here.
type CloudEvent struct {
	SpecVersion string `json:"specversion"`
	// ID is the ID of the outbox message that carries the event.
	ID string `json:"id"`
	// Source is the URI of this service ([Events.Source]).
	Source string `json:"source"`
	// Type is the event's type, such as
	// "com.github.eventsourced.accounts.user.registered.v1".
	Type string `json:"type"`
	// Subject is what the event is about: the user's ID.
	Subject string `json:"subject"`
	// Time is when the change was committed, in UTC to the millisecond.
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	// TraceParent and TraceState are the distributed tracing extension:
	// the W3C trace context of the delivery that published the event,
	// set by [Handler] when that delivery was traced, never stored.
	TraceParent string          `json:"traceparent,omitempty"`
	TraceState  string          `json:"tracestate,omitempty"`
	Data        json.RawMessage `json:"data"`
}

// withTraceContext returns the CloudEvent payload with the distributed
// tracing extension of the span context in ctx: traceparent, and
// tracestate when there is one. With no valid span context in ctx, or a
// payload that is not a JSON object, it returns payload as it is.
//
// It writes the attributes in at the front of the object rather than
// decoding and encoding the event: the payload is sent byte for byte as it
// was stored, and decoding it was a third of the relay's work.
func withTraceContext(ctx context.Context, payload []byte) []byte {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	parent := carrier["traceparent"]
	if parent == "" || len(payload) < 2 || payload[0] != '{' {
		return payload
	}
	out := make([]byte, 0, len(payload)+128)
	out = append(out, `{"traceparent":`...)
	out = appendJSONString(out, parent)
	if state := carrier["tracestate"]; state != "" {
		out = append(out, `,"tracestate":`...)
		out = appendJSONString(out, state)
	}
	if rest := bytes.TrimLeft(payload[1:], " \t\r\n"); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, payload[1:]...)
}

// appendJSONString appends s to b as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}
