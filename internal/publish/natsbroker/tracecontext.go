package natsbroker

import (
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// The headers of the W3C trace context, in the lower case that W3C and
// CloudEvents bindings spell them: NATS headers are case-sensitive, so
// propagation.HeaderCarrier, which writes Traceparent, would not do.
const (
	headerTraceParent = "traceparent"
	headerTraceState  = "tracestate"
)

// headerCarrier is a propagation.TextMapCarrier over the headers of a NATS
// message that keeps each key as it is given.
type headerCarrier nats.Header

var _ propagation.TextMapCarrier = headerCarrier(nil)

func (c headerCarrier) Get(key string) string { return nats.Header(c).Get(key) }

func (c headerCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
