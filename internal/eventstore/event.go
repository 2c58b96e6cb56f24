package eventstore

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
)

// NewEvent returns an event of type typ with a new UUIDv7, data encoded as
// JSON and the given metadata. Stream, Version and RecordedAt are set by
// [Store.Append].
func NewEvent(typ string, data any, md Metadata) (Event, error) {
	body, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("eventstore: encode %s: %w", typ, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Event{}, fmt.Errorf("eventstore: id for %s: %w", typ, err)
	}
	return Event{ID: id, Type: typ, Data: body, Metadata: md}, nil
}

// Check returns an error wrapping [ErrInvalidEvent] when e cannot be
// appended to stream. Backends call it before they write anything.
func Check(stream string, e Event) error {
	switch {
	case stream == "":
		return fmt.Errorf("%w: empty stream name", ErrInvalidEvent)
	case e.ID == uuid.Nil:
		return fmt.Errorf("%w: event of type %q has no ID", ErrInvalidEvent, e.Type)
	case e.Type == "":
		return fmt.Errorf("%w: event %s has no type", ErrInvalidEvent, e.ID)
	case !json.Valid(e.Data):
		return fmt.Errorf("%w: event %s: data is not JSON", ErrInvalidEvent, e.ID)
	}
	return nil
}
