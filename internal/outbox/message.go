package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// NewMessage returns a message for topic with payload encoded as JSON.
func NewMessage(topic string, payload any, now time.Time) (Message, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return Message{}, fmt.Errorf("outbox: encode %s: %w", topic, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Message{}, fmt.Errorf("outbox: id for %s: %w", topic, err)
	}
	return Message{
		ID:        id,
		Topic:     topic,
		Payload:   data,
		CreatedAt: now.UTC().Truncate(time.Millisecond),
	}, nil
}

// Message is one side effect to deliver.
type Message struct {
	ID    uuid.UUID
	Topic string
	// Payload is JSON.
	Payload   []byte
	CreatedAt time.Time
	// Attempts counts the times the message was claimed, this one included.
	// Store.Claim sets it.
	Attempts int
	// Key, when not empty, puts the message in order among the messages
	// of the same key: a store does not claim it while a message of that
	// key added before it is still held, neither acknowledged nor buried.
	// So the messages of one key are delivered one at a time, in the order
	// they were added, while those of other keys go on in parallel; one
	// that is retried holds back the rest of its key, and one that is
	// buried stops holding them; requeued, it goes after the messages of
	// its key added meanwhile. The order of two messages of a key is
	// the order of their Adds, and, when they were added by two units of
	// work, the order in which those committed, provided the second began
	// after the first committed (as two changes of one event stream do).
	Key string
}

// ErrInvalidMessage is returned by [Store.Add] for a message that cannot be
// stored: no ID, topic or creation time, or a payload that is not JSON.
var ErrInvalidMessage = errors.New("outbox: invalid message")

// Check returns an error wrapping [ErrInvalidMessage] when m cannot be
// added. Backends call it before they write anything.
func Check(m Message) error {
	switch {
	case m.ID == uuid.Nil:
		return fmt.Errorf("%w: message for %q has no ID", ErrInvalidMessage, m.Topic)
	case m.Topic == "" || !utf8.ValidString(m.Topic) || strings.IndexByte(m.Topic, 0) >= 0:
		return fmt.Errorf("%w: message %s: topic %q is not a name", ErrInvalidMessage, m.ID, m.Topic)
	case !json.Valid(m.Payload) || !utf8.Valid(m.Payload):
		return fmt.Errorf("%w: message %s: payload is not JSON in UTF-8", ErrInvalidMessage, m.ID)
	case m.CreatedAt.IsZero():
		return fmt.Errorf("%w: message %s has no creation time", ErrInvalidMessage, m.ID)
	case !utf8.ValidString(m.Key) || strings.IndexByte(m.Key, 0) >= 0:
		return fmt.Errorf("%w: message %s: key %q is not text", ErrInvalidMessage, m.ID, m.Key)
	}
	return nil
}
