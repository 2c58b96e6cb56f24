package eventstoretest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// The cases of [eventstore.Store.AppendLaterIf]. As with AppendLater, a
// backend may report a refusal from the call or from the commit, so each
// case runs a whole unit of work.

// appendIf appends events with AppendLaterIf in a unit of work of its own
// whose clock reads now, beside a NoStream append to the stream beside,
// and returns the events with the error of the call or, when that
// succeeded, of the commit.
func appendIf(t *testing.T, h Harness, now time.Time, stream, beside string, cond eventstore.Condition, events ...eventstore.Event) ([]eventstore.Event, error) {
	t.Helper()
	var got []eventstore.Event
	err := h.RunnerAt(func() time.Time { return now }).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if _, err := h.Store.AppendLater(ctx, tx, beside, eventstore.NoStream, newEvents(t, 1)...); err != nil {
			return err
		}
		var err error
		got, err = h.Store.AppendLaterIf(ctx, tx, stream, cond, events...)
		return err
	})
	return got, err
}

// quiet is the condition that stream has no event recorded since since.
func quiet(since time.Time) eventstore.Condition {
	return eventstore.Condition{Since: since, Fewer: 1}
}

// condCase is an append of n new events to stream under cond.
type condCase struct {
	name   string
	stream string
	cond   eventstore.Condition
	n      int
}

// The types of the events that the cases of conditions count, or require
// absent, beside newEvents' "test.happened".
const (
	typeCounted = "test.counted"
	typeAbsent  = "test.absent"
)

// newEventsOf returns n new events of type typ.
func newEventsOf(t *testing.T, typ string, n int) []eventstore.Event {
	t.Helper()
	events := newEvents(t, n)
	for i := range events {
		events[i].Type = typ
	}
	return events
}

// testAppendLaterIfAppends appends, one event and several, to a missing
// stream, to streams whose events are all older than the condition's
// since, and to streams with fewer recent events than it allows, of the
// types it counts, beside more of other types and an absent type's older
// than since, and to a stream whose head was recorded before since after
// an event recorded since, which the stretch after the head leaves out:
// the events follow the head, at the unit of work's time, and come back
// without a version.
func testAppendLaterIfAppends(t *testing.T, h Harness) {
	t0, t1 := tailBase, tailBase.Add(time.Minute)
	appendAt(t, h, t0, "s", eventstore.NoStream, newEvents(t, 2)...)
	appendAt(t, h, t0, "t", eventstore.NoStream, newEvents(t, 1)...)
	appendAt(t, h, t0, "few", eventstore.NoStream, newEvents(t, 2)...)
	appendAt(t, h, t0, "mixed", eventstore.NoStream, newEventsOf(t, typeAbsent, 1)...)
	appendAt(t, h, t1, "mixed", eventstore.Exactly(1), slices.Concat(newEvents(t, 3), newEventsOf(t, typeCounted, 1))...)
	// The later version carries the earlier time: nothing follows it.
	appendAt(t, h, t1, "skewed", eventstore.NoStream, newEvents(t, 1)...)
	appendAt(t, h, t0, "skewed", eventstore.Exactly(1), newEvents(t, 1)...)
	now := t0.Add(time.Hour)
	for i, tc := range []condCase{
		{"a missing stream", "new", quiet(now), 1},
		{"a missing stream, several events", "new2", quiet(time.Time{}), 3},
		{"a nanosecond after the last event", "s", quiet(t0.Add(time.Nanosecond)), 1},
		{"a microsecond after the last event, several events", "t", quiet(t0.Add(time.Microsecond)), 2},
		{"two recent events, fewer than three", "few", eventstore.Condition{Since: t0, Fewer: 3}, 1},
		{"three recent events, fewer than five, several events", "few", eventstore.Condition{Since: t0, Fewer: 5}, 2},
		{"one counted among four recent, fewer than two counted", "mixed", eventstore.Condition{
			Since: t1, Fewer: 2, Counted: []string{typeCounted}, Absent: []string{typeAbsent},
		}, 1},
		{"none counted, an absent type's before since", "mixed", eventstore.Condition{
			Since: t0.Add(time.Microsecond), Fewer: 1, Counted: []string{"test.none"}, Absent: []string{typeAbsent},
		}, 2},
		{"an earlier version's time after since, the head's before", "skewed", quiet(t1), 1},
	} {
		beside := fmt.Sprintf("beside-%d", i)
		before := load(t, h, tc.stream, 0)
		events := newEvents(t, tc.n)
		got, err := appendIf(t, h, now, tc.stream, beside, tc.cond, events...)
		if err != nil {
			t.Fatalf("%s: AppendLaterIf: %v", tc.name, err)
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

// testAppendLaterIfRefused appends to streams whose recent events do not
// meet the condition: as many as it allows, or more, of the types it
// counts, compared to the nanosecond, including ones whose times do not
// grow with their versions, as when clocks disagree; or one of a type it
// requires absent. The unit of work fails with ErrConcurrency and writes
// nothing, neither the append nor the one beside it.
func testAppendLaterIfRefused(t *testing.T, h Harness) {
	t0, t1 := tailBase, tailBase.Add(time.Minute)
	s := appendAt(t, h, t0, "s", eventstore.NoStream, newEvents(t, 1)...)
	s = append(s, appendAt(t, h, t1, "s", eventstore.Exactly(1), newEvents(t, 1)...)...)
	// The middle version carries a later time than the head's.
	skewed := appendAt(t, h, t0, "skewed", eventstore.NoStream, newEvents(t, 1)...)
	skewed = append(skewed, appendAt(t, h, t1.Add(time.Second), "skewed", eventstore.Exactly(1), newEvents(t, 1)...)...)
	skewed = append(skewed, appendAt(t, h, t1, "skewed", eventstore.Exactly(2), newEvents(t, 1)...)...)
	mixed := appendAt(t, h, t0, "mixed", eventstore.NoStream, slices.Concat(newEventsOf(t, typeCounted, 2), newEvents(t, 3))...)
	absent := appendAt(t, h, t1, "absent", eventstore.NoStream, newEventsOf(t, typeAbsent, 1)...)
	now := t1.Add(time.Hour)
	counted := func(since time.Time, fewer int) eventstore.Condition {
		return eventstore.Condition{Since: since, Fewer: fewer, Counted: []string{typeCounted}, Absent: []string{typeAbsent}}
	}
	for i, tc := range []condCase{
		{"the last event's time", "s", quiet(t1), 1},
		{"the last event's time in another zone", "s", quiet(t1.In(time.FixedZone("UTC-5", -5*60*60))), 1},
		{"a microsecond before the last event", "s", quiet(t1.Add(-time.Microsecond)), 2},
		{"the zero time", "s", quiet(time.Time{}), 1},
		{"a middle version's time after the head's, both recent", "skewed", quiet(t1), 1},
		{"a middle version's time after the head's, fewer than two", "skewed", eventstore.Condition{Since: t1, Fewer: 2}, 1},
		{"two recent events, fewer than two", "s", eventstore.Condition{Since: t0, Fewer: 2}, 1},
		{"two recent events, fewer than two, several events", "s", eventstore.Condition{Since: t0, Fewer: 2}, 3},
		{"two counted among five, fewer than two counted", "mixed", counted(t0, 2), 1},
		{"two counted among five, fewer than one counted", "mixed", counted(t0, 1), 2},
		{"an absent type's at since, fewer than five", "absent", counted(t1, 5), 1},
		{"an absent type's, nothing counted", "absent", eventstore.Condition{Since: t0, Fewer: 1, Counted: []string{"test.none"}, Absent: []string{"test.other", typeAbsent}}, 1},
	} {
		beside := fmt.Sprintf("beside-%d", i)
		_, err := appendIf(t, h, now, tc.stream, beside, tc.cond, newEvents(t, tc.n)...)
		if !errors.Is(err, eventstore.ErrConcurrency) {
			t.Errorf("%s: unit of work = %v, want ErrConcurrency", tc.name, err)
		}
		assertStream(t, h, beside)
	}
	assertStream(t, h, "s", s...)
	assertStream(t, h, "skewed", skewed...)
	assertStream(t, h, "mixed", mixed...)
	assertStream(t, h, "absent", absent...)
}

// testAppendLaterIfDuplicates appends events stored already: one of
// another stream, alone and among new ones, to a stream that meets the
// condition and to one that does not, and a stream's own event again,
// whether it meets it or not. Each is ErrDuplicateEvent, whether or not
// the condition holds, and writes nothing.
func testAppendLaterIfDuplicates(t *testing.T, h Harness) {
	t0 := tailBase
	stored := appendAt(t, h, t0, "a", eventstore.NoStream, newEvents(t, 1)...)
	busy := appendAt(t, h, t0, "busy", eventstore.NoStream, newEvents(t, 1)...)
	now := t0.Add(time.Hour)
	for i, tc := range []struct {
		name   string
		stream string
		cond   eventstore.Condition
		events []eventstore.Event
	}{
		{"an event of a, to a quiet stream", "b", quiet(now), stored},
		{"a new event and an event of a, to a quiet stream", "b", quiet(now), append(newEvents(t, 1), stored...)},
		{"an event of a, to a stream that is not quiet", "busy", quiet(t0), stored},
		{"an event of a, to a stream with fewer events than allowed", "busy", eventstore.Condition{Since: t0, Fewer: 2}, stored},
		{"a's own event, a quiet", "a", quiet(t0.Add(time.Second)), stored},
		{"a's own event, a not quiet", "a", quiet(t0), stored},
	} {
		_, err := appendIf(t, h, now, tc.stream, fmt.Sprintf("beside-%d", i), tc.cond, tc.events...)
		if !errors.Is(err, eventstore.ErrDuplicateEvent) {
			t.Errorf("%s: %v, want ErrDuplicateEvent", tc.name, err)
		}
	}
	assertStream(t, h, "a", stored...)
	assertStream(t, h, "b")
	assertStream(t, h, "busy", busy...)
}

// testAppendLaterIfWhileOtherOpen appends to a quiet stream that a unit
// of work still open appends to: once that one commits, the second fails
// with ErrConcurrency, whether its statement ran while the first was open
// (and met the version it took) or after (and met its event).
func testAppendLaterIfWhileOtherOpen(t *testing.T, h Harness) {
	since := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	first := appendAt(t, h, since.Add(-time.Hour), "s", eventstore.NoStream, newEvents(t, 1)...)
	a := hold(t, h, "s", eventstore.Exactly(1))
	loseToHeld(t, h, a, func(ctx context.Context, tx uow.Tx) error {
		_, err := h.Store.AppendLaterIf(ctx, tx, "s", quiet(since), newEvents(t, 1)...)
		return err
	})
	assertStream(t, h, "s", append(first, a.events...)...)
}

// testAppendLaterIfAfterOtherOpen appends to a stream that a unit of work
// still open appends to, under a condition that allows the other's event
// too: the append follows the other's event when its statement ran after
// the other committed, and fails with ErrConcurrency when it ran while
// the other was open and met the version it took; either way the stream
// holds one event at each version. (PostgreSQL's own tests make the
// insert wait on the open row.)
func testAppendLaterIfAfterOtherOpen(t *testing.T, h Harness) {
	first := mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 1)...)
	a := hold(t, h, "s", eventstore.Exactly(1))
	events := newEvents(t, 2)
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		done <- h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			close(started)
			_, err := h.Store.AppendLaterIf(ctx, tx, "s", eventstore.Condition{Fewer: 5}, events...)
			return err
		})
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the second unit of work ended before it appended: %v", err)
	}
	a.commit(t)
	want := append(first, a.events...)
	switch err := <-done; {
	case err == nil:
		want = append(want, events...)
	case !errors.Is(err, eventstore.ErrConcurrency):
		t.Fatalf("the second unit of work: %v, want success or ErrConcurrency", err)
	}
	assertStream(t, h, "s", want...)
}

// testAppendLaterIfInvalid checks the errors a call returns at once: an
// invalid event, a condition that can never hold, and any append in a
// read-only unit of work, whether the condition holds or not; and that
// appending nothing does nothing, even to a stream that does not meet
// the condition.
func testAppendLaterIfInvalid(t *testing.T, h Harness) {
	now := time.Now()
	if _, err := appendIf(t, h, now, "s", "beside", quiet(now), eventstore.Event{Type: "test.happened"}); !errors.Is(err, eventstore.ErrInvalidEvent) {
		t.Errorf("AppendLaterIf of an event without an ID: %v, want ErrInvalidEvent", err)
	}
	for _, fewer := range []int{0, -1} {
		_, err := appendIf(t, h, now, "s", "beside", eventstore.Condition{Fewer: fewer}, newEvents(t, 1)...)
		if err == nil || errors.Is(err, eventstore.ErrConcurrency) {
			t.Errorf("AppendLaterIf under fewer than %d: %v, want an error other than ErrConcurrency", fewer, err)
		}
	}
	assertStream(t, h, "beside")
	readOnly := func(what string) {
		t.Helper()
		err := h.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			_, err := h.Store.AppendLaterIf(ctx, tx, "s", quiet(time.Time{}), newEvents(t, 1)...)
			return err
		})
		if !errors.Is(err, uow.ErrReadOnly) {
			t.Errorf("AppendLaterIf in a read-only unit of work, %s: %v, want ErrReadOnly", what, err)
		}
	}
	readOnly("to a missing stream")
	assertStream(t, h, "s")
	stored := mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 1)...)
	readOnly("to a stream that is not quiet")
	got, err := appendIf(t, h, now, "s", "beside-nothing", quiet(time.Time{}))
	if err != nil || len(got) != 0 {
		t.Errorf("AppendLaterIf of no events = %v, %v; want nothing", describe(got), err)
	}
	assertStream(t, h, "s", stored...)
}
