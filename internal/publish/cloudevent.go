package publish

import (
	"encoding/json"
	"time"
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
	// Subject is what the event is about: the user's ID, or the
	// organization's for an organization's event. It is the key that
	// keeps one subject's events in order.
	Subject string `json:"subject"`
	// Time is when the change was committed, in UTC to the millisecond.
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	// TraceParent and TraceState are the distributed tracing extension:
	// the W3C trace context of the delivery that published the event,
	// set by the handler of package forward when that delivery was
	// traced, never stored.
	TraceParent string          `json:"traceparent,omitempty"`
	TraceState  string          `json:"tracestate,omitempty"`
	Data        json.RawMessage `json:"data"`
}
