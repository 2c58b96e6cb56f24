package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventsourced/accounts/internal/outbox"
)

// Destination names where integration events go. Each destination has
// outbox topics of its own ([Topic]), so that one that is down neither
// holds back nor repeats the deliveries to another.
type Destination string

// The destinations.
const (
	// Broker is NATS JetStream or Kafka, as BROKER_URL says.
	Broker Destination = "broker"
	// Webhook is a Standard Webhooks endpoint.
	Webhook Destination = "webhook"
)

// Topic returns the outbox topic of the events of type typ bound for d,
// such as "broker:user.registered".
func Topic(d Destination, typ string) string { return string(d) + ":" + typ }

// Metadata keys of the Watermill messages that [Handler] publishes.
const (
	// MetadataContentType is the content type of the payload:
	// [ContentType].
	MetadataContentType = "content-type"
	// MetadataKey is the event's subject, the key that keeps one
	// subject's events in order where a publisher partitions (Kafka).
	MetadataKey = "key"
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
	// Type is the event's type, such as "user.registered".
	Type string `json:"type"`
	// Subject is what the event is about: the user's ID.
	Subject string `json:"subject"`
	// Time is when the change was committed, in UTC to the millisecond.
	Time            time.Time       `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
}

// Events adds integration events to the outbox. The zero value has no
// destination and adds nothing: a message for a topic without a handler
// would only be buried.
type Events struct {
	// Source is the CloudEvents source of every event, a URI that names
	// this service, such as its BASE_URL.
	Source string
	// Destinations are where the events go; each event becomes one message
	// per destination.
	Destinations []Destination
}

// Enabled reports whether any destination is configured.
func (e Events) Enabled() bool { return len(e.Destinations) > 0 }

// Keys returns the keys ([outbox.Message.Key]) of the messages about
// subject, one per destination: those [outbox.Purger] deletes when the
// subject is erased.
func (e Events) Keys(subject string) []string {
	keys := make([]string, len(e.Destinations))
	for i, d := range e.Destinations {
		keys[i] = key(d, subject)
	}
	return keys
}

func key(d Destination, subject string) string { return string(d) + ":" + subject }

// Messages returns the outbox messages of one event of type typ about
// subject, with data as its JSON data, created at now: one per destination,
// each carrying the CloudEvent with its own ID, and keyed ([outbox.Message.Key])
// by destination and subject, so that the relay hands each destination one
// subject's events one at a time, in the order of their changes.
func (e Events) Messages(typ, subject string, data any, now time.Time) ([]outbox.Message, error) {
	if len(e.Destinations) == 0 {
		return nil, nil
	}
	body, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("integration: encode %s: %w", typ, err)
	}
	msgs := make([]outbox.Message, 0, len(e.Destinations))
	for _, d := range e.Destinations {
		m, err := outbox.NewMessage(Topic(d, typ), struct{}{}, now)
		if err != nil {
			return nil, err
		}
		// One subject's events to one destination are delivered one at a
		// time, in the order of their changes.
		m.Key = key(d, subject)
		if m.Payload, err = json.Marshal(CloudEvent{
			SpecVersion:     SpecVersion,
			ID:              m.ID.String(),
			Source:          e.Source,
			Type:            typ,
			Subject:         subject,
			Time:            m.CreatedAt,
			DataContentType: "application/json",
			Data:            body,
		}); err != nil {
			return nil, fmt.Errorf("integration: encode %s: %w", typ, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// Handler returns the outbox handler that publishes a message's CloudEvent
// through pub, to the topic that topic returns for the event's type. The
// Watermill message has the outbox message's ID as its UUID, the CloudEvent
// as its payload, byte for byte as [Events.Messages] stored it, and
// [MetadataContentType] and [MetadataKey] set. The publish must be
// confirmed by the destination when Publish returns nil; any error makes
// the relay try again.
//
// The handler reads the event's type from the message's topic and its
// subject from the message's key, as [Events.Messages] set them, and does
// not decode the payload: at thousands of events a second, decoding it was
// a third of the relay's work.
func Handler(pub message.Publisher, topic func(eventType string) string) outbox.Handler {
	return func(ctx context.Context, m outbox.Message) error {
		_, typ, ok := strings.Cut(m.Topic, ":")
		_, subject, keyed := strings.Cut(m.Key, ":")
		if !ok || !keyed {
			return fmt.Errorf("%w: message %s of topic %q, key %q", errNotAnEvent, m.ID, m.Topic, m.Key)
		}
		wm := message.NewMessage(m.ID.String(), m.Payload)
		wm.Metadata.Set(MetadataContentType, ContentType)
		wm.Metadata.Set(MetadataKey, subject)
		wm.SetContext(ctx)
		if err := pub.Publish(topic(typ), wm); err != nil {
			return fmt.Errorf("integration: publish %s %s: %w", typ, m.ID, err)
		}
		return nil
	}
}

// errNotAnEvent is the failure of a message that [Events.Messages] did not
// make.
var errNotAnEvent = errors.New("integration: not an integration event")

// Subject returns the subject or topic of the events of type typ for a
// broker under prefix: prefix and the type, such as
// "accounts.user.registered".
func Subject(prefix string) func(eventType string) string {
	return func(typ string) string { return prefix + typ }
}

// Category returns the topic of the events of type typ for a broker under
// prefix: prefix and the part of the type before its first dot, such as
// "accounts.user" for "user.registered". Every event of one subject then
// goes to one topic, where a key keeps them in order (Kafka).
func Category(prefix string) func(eventType string) string {
	return func(typ string) string {
		category, _, _ := strings.Cut(typ, ".")
		return prefix + category
	}
}
