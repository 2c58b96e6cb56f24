package eventstoretest

import (
	"errors"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
)

// testSchemaVersions appends events of several schema versions through
// every way of appending, one event and several, and checks that every
// reader returns each event's version as appended, with 0 stored as 1.
func testSchemaVersions(t *testing.T, h Harness) {
	versioned := func(versions ...int) []eventstore.Event {
		events := newEvents(t, len(versions))
		for i, v := range versions {
			events[i].SchemaVersion = v
		}
		return events
	}
	want := map[string]int{}
	note := func(appended []eventstore.Event, sent []eventstore.Event) {
		for i, e := range sent {
			want[e.ID.String()] = max(e.SchemaVersion, 1)
			if appended[i].SchemaVersion != max(e.SchemaVersion, 1) {
				t.Errorf("an append returned schema version %d for an event of %d, want %d",
					appended[i].SchemaVersion, e.SchemaVersion, max(e.SchemaVersion, 1))
			}
		}
	}
	one, several := versioned(2), versioned(0, 3, 1)
	note(mustAppend(t, h, "append-one", eventstore.NoStream, one...), one)
	note(mustAppend(t, h, "append-several", eventstore.NoStream, several...), several)
	for i, events := range [][]eventstore.Event{versioned(5), versioned(4, 0)} {
		stream := []string{"later-one", "later-several"}[i]
		got, err := appendLater(t, h, stream, eventstore.NoStream, events...)
		if err != nil {
			t.Fatalf("AppendLater: %v", err)
		}
		note(got, events)
	}
	now := time.Now().UTC()
	for i, events := range [][]eventstore.Event{versioned(7), versioned(0, 6)} {
		stream := []string{"if-one", "if-several"}[i]
		got, err := appendIf(t, h, now, stream, stream+"-beside", quiet(now.Add(-time.Minute)), events...)
		if err != nil {
			t.Fatalf("AppendLaterIf: %v", err)
		}
		note(got, events)
	}

	check := func(reader string, events []eventstore.Event) {
		t.Helper()
		for _, e := range events {
			v, ok := want[e.ID.String()]
			if ok && e.SchemaVersion != v {
				t.Errorf("%s returned %s at schema version %d, want %d", reader, e.ID, e.SchemaVersion, v)
			}
		}
	}
	for _, stream := range []string{"append-one", "append-several", "later-one", "later-several", "if-one", "if-several"} {
		check("Load", load(t, h, stream, 0))
		events, _ := loadSince(t, h, stream, now.Add(-time.Hour))
		check("LoadSince", events)
	}
	all := readAllUntil(t, h, eventstore.Position{}, len(want))
	check("ReadAll", all)
	check("ReadCommitted", readCommitted(t, h, eventstore.Position{}, 100))

	// A version out of range is refused and writes nothing.
	for _, v := range []int{-1, eventstore.MaxSchemaVersion + 1} {
		bad := versioned(v)
		_, err := tryAppend(t, h, "refused", eventstore.Any, append(versioned(1), bad...)...)
		if !errors.Is(err, eventstore.ErrInvalidEvent) {
			t.Errorf("schema version %d: Append error = %v, want ErrInvalidEvent", v, err)
		}
	}
	assertStream(t, h, "refused")
}
