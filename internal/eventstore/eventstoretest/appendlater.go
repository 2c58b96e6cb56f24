package eventstoretest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// The cases of [eventstore.Store.AppendLater]. A backend may report a
// conflict from the call or from the commit, so each case runs a whole
// unit of work and checks the error of either, and what was stored.

// appendLater appends events with AppendLater in a unit of work of its own
// and returns them with the error of the call or, when that succeeded, of
// the commit.
func appendLater(t *testing.T, h Harness, stream string, expected eventstore.Expected, events ...eventstore.Event) ([]eventstore.Event, error) {
	t.Helper()
	var got []eventstore.Event
	err := h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var err error
		got, err = h.Store.AppendLater(ctx, tx, stream, expected, events...)
		return err
	})
	return got, err
}

// testAppendLaterNumbers appends under NoStream, Exactly and Any, one event
// and several, and checks the events returned against those stored.
func testAppendLaterNumbers(t *testing.T, h Harness) {
	steps := []struct {
		expected eventstore.Expected
		n        int
	}{{eventstore.NoStream, 2}, {eventstore.Exactly(2), 1}, {eventstore.Exactly(3), 3}, {eventstore.Any, 1}}
	var returned []eventstore.Event
	for _, step := range steps {
		events := newEvents(t, step.n)
		for i := range events {
			events[i].Metadata = eventstore.Metadata{CorrelationID: fmt.Sprintf("c-%d", i), Extra: map[string]string{"n": fmt.Sprint(i)}}
		}
		got, err := appendLater(t, h, "s", step.expected, events...)
		if err != nil {
			t.Fatalf("AppendLater(s, %d) of %d: %v", step.expected, step.n, err)
		}
		assertIDs(t, fmt.Sprintf("AppendLater(s, %d)", step.expected), got, events...)
		returned = append(returned, got...)
	}
	// Two appends to the stream in one unit of work, the second at the
	// version the first returned.
	err := h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		for range 2 {
			got, err := h.Store.AppendLater(ctx, tx, "s", eventstore.Exactly(returned[len(returned)-1].Version), newEvents(t, 1)...)
			if err != nil {
				return err
			}
			returned = append(returned, got...)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("two AppendLater in one unit of work: %v", err)
	}
	stored := load(t, h, "s", 0)
	if len(stored) != len(returned) {
		t.Fatalf("stream s holds %v, want %v", describe(stored), describe(returned))
	}
	for i := range stored {
		// assertEvent compares the version and time AppendLater gave
		// with those stored.
		assertEvent(t, fmt.Sprintf("Load(s)[%d]", i), stored[i], returned[i])
	}
	assertStream(t, h, "s", returned...)
	assertIDs(t, "ReadAll", readAllUntil(t, h, eventstore.Position{}, len(returned)), returned...)
}

// testAppendLaterConflicts appends at versions the stream is not at, after
// another append in the same unit of work: the unit of work fails with
// ErrConcurrency and writes nothing, neither the append nor the other.
func testAppendLaterConflicts(t *testing.T, h Harness) {
	first := mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 2)...)
	for i, tc := range []struct {
		name     string
		stream   string
		expected eventstore.Expected

		n int
	}{
		{"behind", "s", eventstore.Exactly(1), 1},
		{"behind, several events", "s", eventstore.Exactly(1), 3},
		{"ahead", "s", eventstore.Exactly(5), 1},
		{"ahead, several events", "s", eventstore.Exactly(5), 2},
		{"no stream", "s", eventstore.NoStream, 1},
		{"missing stream", "new", eventstore.Exactly(1), 1},
	} {
		other := fmt.Sprintf("other-%d", i)
		err := h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			if _, err := h.Store.AppendLater(ctx, tx, other, eventstore.NoStream, newEvents(t, 1)...); err != nil {
				return err
			}
			_, err := h.Store.AppendLater(ctx, tx, tc.stream, tc.expected, newEvents(t, tc.n)...)
			return err
		})
		if !errors.Is(err, eventstore.ErrConcurrency) {
			t.Errorf("%s: unit of work = %v, want ErrConcurrency", tc.name, err)
		}
		assertStream(t, h, other)
	}
	assertStream(t, h, "s", first...)
	assertStream(t, h, "new")
}

// testAppendLaterDuplicates appends an event stored in another stream,
// which is ErrDuplicateEvent and writes nothing, and one stored in the same
// stream, which either finds it stored, as Append does, or is
// ErrDuplicateEvent; both leave the stream as it was.
func testAppendLaterDuplicates(t *testing.T, h Harness) {
	stored := mustAppend(t, h, "a", eventstore.NoStream, newEvents(t, 1)...)
	if _, err := appendLater(t, h, "b", eventstore.NoStream, append(newEvents(t, 1), stored...)...); !errors.Is(err, eventstore.ErrDuplicateEvent) {
		t.Errorf("AppendLater(b) of an event of a: %v, want ErrDuplicateEvent", err)
	}
	assertStream(t, h, "b")
	for _, expected := range []eventstore.Expected{eventstore.Exactly(1), eventstore.NoStream} {
		// At NoStream, the version the event was first appended at, as a
		// command run again with the same event would.
		got, err := appendLater(t, h, "a", expected, stored...)
		switch {
		case errors.Is(err, eventstore.ErrDuplicateEvent):
		case err != nil:
			t.Errorf("AppendLater(a, %d) of its own event: %v, want the stored event or ErrDuplicateEvent", expected, err)
		default:
			assertIDs(t, fmt.Sprintf("AppendLater(a, %d) of its own event", expected), got, stored...)
		}
	}
	assertStream(t, h, "a", stored...)
	// An ID stored elsewhere, appended at a version the stream has passed,
	// alone and among new events; and the stream's own events appended
	// again at the version they were first appended at.
	moved := mustAppend(t, h, "c", eventstore.NoStream, newEvents(t, 2)...)
	for _, tc := range []struct {
		name     string
		expected eventstore.Expected
		events   []eventstore.Event
	}{
		{"an event of a", eventstore.Exactly(1), stored},
		{"a new event and an event of a", eventstore.Exactly(1), append(newEvents(t, 1), stored...)},
		{"its own events", eventstore.NoStream, moved},
	} {
		got, err := appendLater(t, h, "c", tc.expected, tc.events...)
		switch {
		case errors.Is(err, eventstore.ErrDuplicateEvent):
		case err == nil && tc.name == "its own events":
			assertIDs(t, "AppendLater(c) of its own events", got, moved...)
		default:
			t.Errorf("AppendLater(c, %d) behind, of %s: %v, want ErrDuplicateEvent", tc.expected, tc.name, err)
		}
	}
	assertStream(t, h, "c", moved...)
}

// testAppendLaterFailsALaterCall makes a conflicting append's error come
// from the next statement of its unit of work, a Load: the unit of work
// fails with ErrConcurrency, writes nothing, and the store works after.
func testAppendLaterFailsALaterCall(t *testing.T, h Harness) {
	first := mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 2)...)
	err := h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if _, err := h.Store.AppendLater(ctx, tx, "other", eventstore.NoStream, newEvents(t, 1)...); err != nil {
			return err
		}
		if _, err := h.Store.AppendLater(ctx, tx, "s", eventstore.Exactly(1), newEvents(t, 1)...); err != nil {
			return err
		}
		_, err := h.Store.Load(ctx, tx, "s", 0)
		return err
	})
	if !errors.Is(err, eventstore.ErrConcurrency) {
		t.Errorf("unit of work = %v, want ErrConcurrency", err)
	}
	assertStream(t, h, "other")
	more := mustAppend(t, h, "s", eventstore.Exactly(2), newEvents(t, 1)...)
	assertStream(t, h, "s", append(first, more...)...)
}

// testAppendLaterWhileOtherOpen appends at a version that a unit of work
// still open has taken: once that commits, the second fails with
// ErrConcurrency, whether it learns it at the append or at its commit. A
// backend that sends the append with the commit may meet the other's row
// still open or committed; both must be ErrConcurrency. (PostgreSQL's own
// tests make the insert wait on the open row.)
func testAppendLaterWhileOtherOpen(t *testing.T, h Harness) {
	first := mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 1)...)
	a := hold(t, h, "s", eventstore.Exactly(1))
	loseToHeld(t, h, a, func(ctx context.Context, tx uow.Tx) error {
		_, err := h.Store.AppendLater(ctx, tx, "s", eventstore.Exactly(1), newEvents(t, 1)...)
		return err
	})
	assertStream(t, h, "s", append(first, a.events...)...)
}

// testAppendLaterRefused checks the errors a call returns at once: an
// invalid event, and any append in a read-only unit of work.
func testAppendLaterRefused(t *testing.T, h Harness) {
	if _, err := appendLater(t, h, "s", eventstore.NoStream, eventstore.Event{Type: "test.happened"}); !errors.Is(err, eventstore.ErrInvalidEvent) {
		t.Errorf("AppendLater of an event without an ID: %v, want ErrInvalidEvent", err)
	}
	err := h.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		_, err := h.Store.AppendLater(ctx, tx, "s", eventstore.NoStream, newEvents(t, 1)...)
		return err
	})
	if !errors.Is(err, uow.ErrReadOnly) {
		t.Errorf("AppendLater in a read-only unit of work: %v, want ErrReadOnly", err)
	}
	assertStream(t, h, "s")
}
