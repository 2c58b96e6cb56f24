package eventstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

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

// MaxSchemaVersion is the highest [Event.SchemaVersion] a store keeps: a
// type's shape would have to change that often for it to be reached.
const MaxSchemaVersion = 32767

// StoredSchemaVersion returns the schema version an event is stored
// with: its own, or 1 for 0.
func StoredSchemaVersion(e Event) int { return max(e.SchemaVersion, 1) }

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
	case e.SchemaVersion < 0 || e.SchemaVersion > MaxSchemaVersion:
		return fmt.Errorf("%w: event %s: schema version %d is not between 1 and %d", ErrInvalidEvent, e.ID, e.SchemaVersion, MaxSchemaVersion)
	case !json.Valid(e.Data) || !utf8.Valid(e.Data):
		return fmt.Errorf("%w: event %s: data is not JSON in UTF-8", ErrInvalidEvent, e.ID)
	case hasNulEscape(e.Data):
		return fmt.Errorf("%w: event %s: data holds a NUL character (\\u0000)", ErrInvalidEvent, e.ID)
	case !storableText(stream, e.Type, e.Metadata.CorrelationID, e.Metadata.CausationID):
		return fmt.Errorf("%w: event %s: stream, type or metadata is not UTF-8 text without NUL", ErrInvalidEvent, e.ID)
	}
	for k, v := range e.Metadata.Extra {
		if !storableText(k, v) {
			return fmt.Errorf("%w: event %s: metadata %q is not UTF-8 text without NUL", ErrInvalidEvent, e.ID, k)
		}
	}
	return nil
}

// storableText reports whether every s is valid UTF-8 without a NUL
// character, which text columns refuse.
func storableText(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return false
		}
	}
	return true
}

// hasNulEscape reports whether the JSON text data escapes a NUL character,
// which no backend's JSON column can store.
func hasNulEscape(data []byte) bool {
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		j += i
		// The escape counts only if the backslash is not itself escaped.
		backslashes := 0
		for k := j - 1; k >= 0 && data[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return true
		}
		i = j + 1
	}
}

// CheckAppend checks an append before a backend writes anything: expected
// must be [Any] or a version, every event must pass [Check], and no ID may
// be given twice ([ErrDuplicateEvent]). It returns the events' IDs in order.
func CheckAppend(stream string, expected Expected, events []Event) ([]uuid.UUID, error) {
	if expected < Any {
		return nil, fmt.Errorf("invalid expected version %d", expected)
	}
	ids := make([]uuid.UUID, len(events))
	seen := make(map[uuid.UUID]bool, len(events))
	for i, e := range events {
		if err := Check(stream, e); err != nil {
			return nil, err
		}
		if seen[e.ID] {
			return nil, fmt.Errorf("%w: event %s given twice", ErrDuplicateEvent, e.ID)
		}
		seen[e.ID] = true
		ids[i] = e.ID
	}
	return ids, nil
}
