package eventstoretest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// The cases of [eventstore.Store.AppendLaterIfQuiet]. As with AppendLater,
// a backend may report a refusal from the call or from the commit, so each
// case runs a whole unit of work.

// appendIfQuiet appends events with AppendLaterIfQuiet in a unit of work of
// its own whose clock reads now, beside a NoStream append to the stream
// beside, and returns the events with the error of the call or, when that
// succeeded, of the commit.
func appendIfQuiet(t *testing.T, h Harness, now time.Time, stream, beside string, since time.Time, events ...eventstore.Event) ([]eventstore.Event, error) {
	t.Helper()
	var got []eventstore.Event
	err := h.RunnerAt(func() time.Time { return now }).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if _, err := h.Store.AppendLater(ctx, tx, beside, eventstore.NoStream, newEvents(t, 1)...); err != nil {
			return err
		}
		var err error
		got, err = h.Store.AppendLaterIfQuiet(ctx, tx, stream, since, events...)
		return err
	})
	return got, err
}

// quietCase is an append of n new events to stream, quiet since since.
type quietCase struct {
	name   string
	stream string
	since  time.Time
	n      int
}

// testAppendLaterIfQuietAppends appends, one event and several, to a
// missing stream and to streams whose events are all older than since: the
// events follow the head, at the unit of work's time, and come back
// without a version.
func testAppendLaterIfQuietAppends(t *testing.T, h Harness) {
	t0 := tailBase
	appendAt(t, h, t0, "s", eventstore.NoStream, newEvents(t, 2)...)
	appendAt(t, h, t0, "t", eventstore.NoStream, newEvents(t, 1)...)
	now := t0.Add(time.Hour)
	for i, tc := range []quietCase{
		{"a missing stream", "new", now, 1},
		{"a missing stream, several events", "new2", time.Time{}, 3},
		{"a nanosecond after the last event", "s", t0.Add(time.Nanosecond), 1},
		{"a microsecond after the last event, several events", "t", t0.Add(time.Microsecond), 2},
	} {
		beside := fmt.Sprintf("beside-%d", i)
		before := load(t, h, tc.stream, 0)
		events := newEvents(t, tc.n)
		got, err := appendIfQuiet(t, h, now, tc.stream, beside, tc.since, events...)
		if err != nil {
			t.Fatalf("%s: AppendLaterIfQuiet: %v", tc.name, err)
		}
		assertIDs(t, tc.name, got, events...)
		for j, e := range got {
			if e.Stream != tc.stream || e.Version != 0 || !e.RecordedAt.Equal(now) {
				t.Errorf("%s: returned[%d] is %s version %d at %s, want %s version 0 at %s",
					tc.name, j, e.Stream, e.Version, e.RecordedAt, tc.stream, now)
			}
		}
		assertStream(t, h, tc.stream, append(before, events...)...)
		for _, e := range load(t, h, tc.stream, 0)[len(before):] {
			if !e.RecordedAt.Equal(now) {
				t.Errorf("%s: %s stored at %s, want %s", tc.name, e.ID, e.RecordedAt, now)
			}
		}
		if got := load(t, h, beside, 0); len(got) != 1 {
			t.Errorf("%s: the append beside stored %d events, want 1", tc.name, len(got))
		}
	}
}

// testAppendLaterIfQuietRefused appends to streams that have an event
// recorded at or after since, compared to the nanosecond, including one
// whose head is older than an earlier version, as when clocks disagree:
// the unit of work fails with ErrConcurrency and writes nothing, neither
// the append nor the one beside it.
func testAppendLaterIfQuietRefused(t *testing.T, h Harness) {
	t0, t1 := tailBase, tailBase.Add(time.Minute)
	s := appendAt(t, h, t0, "s", eventstore.NoStream, newEvents(t, 1)...)
	s = append(s, appendAt(t, h, t1, "s", eventstore.Exactly(1), newEvents(t, 1)...)...)
	// The later version carries the earlier time.
	skewed := appendAt(t, h, t1, "skewed", eventstore.NoStream, newEvents(t, 1)...)
	skewed = append(skewed, appendAt(t, h, t0, "skewed", eventstore.Exactly(1), newEvents(t, 1)...)...)
	now := t1.Add(time.Hour)
	for i, tc := range []quietCase{
		{"the last event's time", "s", t1, 1},
		{"the last event's time in another zone", "s", t1.In(time.FixedZone("UTC-5", -5*60*60)), 1},
		{"a microsecond before the last event", "s", t1.Add(-time.Microsecond), 2},
		{"the zero time", "s", time.Time{}, 1},
		{"the earlier version's time, after the head's", "skewed", t1, 1},
	} {
		beside := fmt.Sprintf("beside-%d", i)
		_, err := appendIfQuiet(t, h, now, tc.stream, beside, tc.since, newEvents(t, tc.n)...)
		if !errors.Is(err, eventstore.ErrConcurrency) {
			t.Errorf("%s: unit of work = %v, want ErrConcurrency", tc.name, err)
		}
		assertStream(t, h, beside)
	}
	assertStream(t, h, "s", s...)
	assertStream(t, h, "skewed", skewed...)
}

// testAppendLaterIfQuietDuplicates appends events stored already: one of
// another stream, alone and among new ones, to a quiet stream and to one
// that is not, and a stream's own event again, quiet or not. Each is
// ErrDuplicateEvent, whatever the stream's quiet, and writes nothing.
func testAppendLaterIfQuietDuplicates(t *testing.T, h Harness) {
	t0 := tailBase
	stored := appendAt(t, h, t0, "a", eventstore.NoStream, newEvents(t, 1)...)
	busy := appendAt(t, h, t0, "busy", eventstore.NoStream, newEvents(t, 1)...)
	now := t0.Add(time.Hour)
	for i, tc := range []struct {
		name   string
		stream string
		since  time.Time
		events []eventstore.Event
	}{
		{"an event of a, to a quiet stream", "b", now, stored},
		{"a new event and an event of a, to a quiet stream", "b", now, append(newEvents(t, 1), stored...)},
		{"an event of a, to a stream that is not quiet", "busy", t0, stored},
		{"a's own event, a quiet", "a", t0.Add(time.Second), stored},
		{"a's own event, a not quiet", "a", t0, stored},
	} {
		_, err := appendIfQuiet(t, h, now, tc.stream, fmt.Sprintf("beside-%d", i), tc.since, tc.events...)
		if !errors.Is(err, eventstore.ErrDuplicateEvent) {
			t.Errorf("%s: %v, want ErrDuplicateEvent", tc.name, err)
		}
	}
	assertStream(t, h, "a", stored...)
	assertStream(t, h, "b")
	assertStream(t, h, "busy", busy...)
}

// testAppendLaterIfQuietWhileOtherOpen appends to a quiet stream that a
// unit of work still open appends to: once that one commits, the second
// fails with ErrConcurrency, whether its statement ran while the first was
// open (and met the version it took) or after (and met its event).
func testAppendLaterIfQuietWhileOtherOpen(t *testing.T, h Harness) {
	since := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	first := appendAt(t, h, since.Add(-time.Hour), "s", eventstore.NoStream, newEvents(t, 1)...)
	a := hold(t, h, "s", eventstore.Exactly(1))
	loseToHeld(t, h, a, func(ctx context.Context, tx uow.Tx) error {
		_, err := h.Store.AppendLaterIfQuiet(ctx, tx, "s", since, newEvents(t, 1)...)
		return err
	})
	assertStream(t, h, "s", append(first, a.events...)...)
}

// testAppendLaterIfQuietInvalid checks the errors a call returns at once:
// an invalid event, and any append in a read-only unit of work, quiet or
// not; and that appending nothing does nothing, even to a stream that is
// not quiet.
func testAppendLaterIfQuietInvalid(t *testing.T, h Harness) {
	now := time.Now()
	if _, err := appendIfQuiet(t, h, now, "s", "beside", now, eventstore.Event{Type: "test.happened"}); !errors.Is(err, eventstore.ErrInvalidEvent) {
		t.Errorf("AppendLaterIfQuiet of an event without an ID: %v, want ErrInvalidEvent", err)
	}
	readOnly := func(what string) {
		t.Helper()
		err := h.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			_, err := h.Store.AppendLaterIfQuiet(ctx, tx, "s", time.Time{}, newEvents(t, 1)...)
			return err
		})
		if !errors.Is(err, uow.ErrReadOnly) {
			t.Errorf("AppendLaterIfQuiet in a read-only unit of work, %s: %v, want ErrReadOnly", what, err)
		}
	}
	readOnly("to a missing stream")
	assertStream(t, h, "s")
	stored := mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 1)...)
	readOnly("to a stream that is not quiet")
	got, err := appendIfQuiet(t, h, now, "s", "beside-nothing", time.Time{})
	if err != nil || len(got) != 0 {
		t.Errorf("AppendLaterIfQuiet of no events = %v, %v; want nothing", describe(got), err)
	}
	assertStream(t, h, "s", stored...)
}
