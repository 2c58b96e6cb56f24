package forward

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/publish"
)

// Metadata keys of the Watermill messages that [Handler] publishes.
const (
	// MetadataContentType is the content type of the payload:
	// [publish.ContentType].
	MetadataContentType = "content-type"
	// MetadataKey is the event's subject, the key that keeps one
	// subject's events in order where a publisher partitions (Kafka).
	MetadataKey = "key"
)

// Handler returns the outbox handler that publishes a message's CloudEvent
// through pub, to the topic that topic returns for the event's type. The
// Watermill message has the outbox message's ID as its UUID, the CloudEvent
// as its payload, byte for byte as [publish.Events.Messages] stored it, and
// [MetadataContentType] and [MetadataKey] set. When ctx carries a valid
// span context (the relay's delivery span), the CloudEvent also carries it
// as the distributed tracing extension ([publish.CloudEvent.TraceParent]),
// and the Watermill message has ctx, so that the publisher's own span, and
// the trace headers it sends, are children of the delivery. The publish
// must be confirmed by the destination when Publish returns nil; any error
// makes the relay try again, and one that says the destination could not
// be reached at all wraps [outbox.ErrUnreachable] ([outbox.Unreachable]),
// which opens the topic's breaker at once.
//
// The handler reads the event's type from the message's topic and its
// subject from the message's key, as [publish.Events.Messages] set them,
// and does not decode the payload: at thousands of events a second,
// decoding it was a third of the relay's work.
func Handler(pub message.Publisher, topic func(eventType string) string) outbox.Handler {
	return func(ctx context.Context, m outbox.Message) error {
		_, typ, ok := strings.Cut(m.Topic, ":")
		_, subject, keyed := strings.Cut(m.Key, ":")
		if !ok || !keyed {
			return fmt.Errorf("%w: message %s of topic %q, key %q", errNotAnEvent, m.ID, m.Topic, m.Key)
		}
		wm := message.NewMessage(m.ID.String(), withTraceContext(ctx, m.Payload))
		wm.Metadata.Set(MetadataContentType, publish.ContentType)
		wm.Metadata.Set(MetadataKey, subject)
		wm.SetContext(ctx)
		if err := pub.Publish(topic(typ), wm); err != nil {
			return fmt.Errorf("publish: publish %s %s: %w", typ, m.ID, outbox.Unreachable(err))
		}
		return nil
	}
}

// errNotAnEvent is the failure of a message that [publish.Events.Messages]
// did not make.
var errNotAnEvent = errors.New("publish: not an integration event")

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
