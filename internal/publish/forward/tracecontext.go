package forward

import (
	"bytes"
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/propagation"
)

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
