package eventstore_test

import (
	"errors"
	"testing"

	"github.com/eventsourced/accounts/internal/eventstore"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	valid, err := eventstore.NewEvent("user.signed_in", map[string]string{"path": `C:\u0000`}, eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	if err := eventstore.Check("user-1", valid); err != nil {
		t.Errorf("an escaped backslash before u0000 is plain text, got %v", err)
	}
	for name, mutate := range map[string]func(*eventstore.Event, *string){
		"no stream":       func(_ *eventstore.Event, s *string) { *s = "" },
		"NUL in stream":   func(_ *eventstore.Event, s *string) { *s = "user\x00" },
		"no type":         func(e *eventstore.Event, _ *string) { e.Type = "" },
		"not JSON":        func(e *eventstore.Event, _ *string) { e.Data = []byte("{") },
		"not UTF-8":       func(e *eventstore.Event, _ *string) { e.Data = []byte("\"\xff\"") },
		"NUL escape":      func(e *eventstore.Event, _ *string) { e.Data = []byte(`{"a":"x\u0000"}`) },
		"NUL in metadata": func(e *eventstore.Event, _ *string) { e.Metadata.Extra = map[string]string{"k": "\x00"} },
	} {
		e, stream := valid, "user-1"
		mutate(&e, &stream)
		if err := eventstore.Check(stream, e); !errors.Is(err, eventstore.ErrInvalidEvent) {
			t.Errorf("%s: got %v, want ErrInvalidEvent", name, err)
		}
	}
}
