package publish

import (
	"encoding/json"
	"fmt"
	"time"

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
// such as "broker:com.github.eventsourced.accounts.user.registered.v1".
func Topic(d Destination, typ string) string { return string(d) + ":" + typ }

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
		return nil, fmt.Errorf("publish: encode %s: %w", typ, err)
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
			return nil, fmt.Errorf("publish: encode %s: %w", typ, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}
