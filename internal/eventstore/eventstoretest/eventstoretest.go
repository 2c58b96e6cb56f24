package eventstoretest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// Harness is what the suite needs of a backend: a fresh, empty store per call.
type Harness struct {
	// Runner runs the units of work in which the suite calls Store.
	Runner uow.Runner
	// RunnerAt returns a runner like Runner, on the same database, whose
	// units of work take their time from now. The cases of
	// [eventstore.Store.LoadSince] and [eventstore.Store.AppendLaterIf]
	// need it to record events at the times they choose.
	RunnerAt func(now func() time.Time) uow.Runner
	// Store is the store under test, empty when setup returns it.
	Store eventstore.Store
}

// Features states what a backend guarantees, as Watermill's pub/sub test suite does.
type Features struct {
	// ConcurrentWriters: a write transaction can stay open while another commits (PostgreSQL yes; SQLite serialises writers, no).
	ConcurrentWriters bool
}

// visibleWithin bounds how long the suite waits for committed events to be
// returned by [eventstore.Store.ReadAll]. On PostgreSQL any transaction open
// anywhere on the server delays them, such as one of a test running in
// parallel in another package.
const visibleWithin = 10 * time.Second

// testCase is one subtest of the suite.
type testCase struct {
	name string
	// concurrent marks cases that need [Features.ConcurrentWriters].
	concurrent bool
	run        func(t *testing.T, h Harness)
}

// Run runs the suite as parallel subtests of t. setup is called once per
// subtest and must return a fresh, empty store; it registers its own
// cleanup with t.
func Run(t *testing.T, f Features, setup func(t *testing.T) Harness) {
	cases := []testCase{
		{name: "AppendToNewStream", run: testAppendToNewStream},
		{name: "VersionsContinue", run: testVersionsContinue},
		{name: "ConcurrencyMismatch", run: testConcurrencyMismatch},
		{name: "FailedAppendWritesNothing", run: testFailedAppendWritesNothing},
		{name: "IdempotentReappend", run: testIdempotentReappend},
		{name: "IdempotentInSameUnitOfWork", run: testIdempotentInSameUnitOfWork},
		{name: "DuplicateEvent", run: testDuplicateEvent},
		{name: "InvalidEvent", run: testInvalidEvent},
		{name: "RolledBackAppend", run: testRolledBackAppend},
		{name: "Load", run: testLoad},
		{name: "RecordedAt", run: testRecordedAt},
		{name: "MetadataRoundTrip", run: testMetadataRoundTrip},
		{name: "DataRoundTrip", run: testDataRoundTrip},
		{name: "SchemaVersions", run: testSchemaVersions},
		{name: "ReadAllCommitOrder", run: testReadAllCommitOrder},
		{name: "ReadAllResume", run: testReadAllResume},
		{name: "ReadAllLimit", run: testReadAllLimit},
		{name: "RacingAppends", concurrent: true, run: testRacingAppends},
		{name: "AppendWhileOtherOpen", concurrent: true, run: testAppendWhileOtherOpen},
		{name: "ReadAllWaitsForInFlight", concurrent: true, run: testReadAllWaitsForInFlight},
		{name: "ReadCommitted/AsReadAll", run: testReadCommittedAsReadAll},
		{name: "ReadCommitted/PassesInFlight", concurrent: true, run: testReadCommittedPassesInFlight},
		{name: "Lock/InUnitOfWork", run: testLock},
		{name: "LoadSince/Since", run: testLoadSince},
		{name: "LoadSince/VersionOrder", run: testLoadSinceVersionOrder},
		{name: "LoadSince/HeadForAppend", run: testLoadSinceHeadForAppend},
		{name: "LoadSince/ConcurrentAppend", concurrent: true, run: testLoadSinceConcurrentAppend},
		{name: "Truncate/KeepsTheVersion", run: testTruncateKeepsTheVersion},
		{name: "Truncate/GoneForEveryReader", run: testTruncateGoneForEveryReader},
		{name: "Truncate/ReadOnlyRefuses", run: testTruncateReadOnly},
		{name: "AppendLater/Numbers", run: testAppendLaterNumbers},
		{name: "AppendLater/Conflicts", run: testAppendLaterConflicts},
		{name: "AppendLater/Duplicates", run: testAppendLaterDuplicates},
		{name: "AppendLater/FailsALaterCall", run: testAppendLaterFailsALaterCall},
		{name: "AppendLater/WhileOtherOpen", concurrent: true, run: testAppendLaterWhileOtherOpen},
		{name: "AppendLater/Refused", run: testAppendLaterRefused},
		{name: "AppendLaterIf/Appends", run: testAppendLaterIfAppends},
		{name: "AppendLaterIf/Refused", run: testAppendLaterIfRefused},
		{name: "AppendLaterIf/Duplicates", run: testAppendLaterIfDuplicates},
		{name: "AppendLaterIf/WhileOtherOpen", concurrent: true, run: testAppendLaterIfWhileOtherOpen},
		{name: "AppendLaterIf/AfterOtherOpen", concurrent: true, run: testAppendLaterIfAfterOtherOpen},
		{name: "AppendLaterIf/Invalid", run: testAppendLaterIfInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.concurrent && !f.ConcurrentWriters {
				t.Skip("the backend serialises writers (Features.ConcurrentWriters is false)")
			}
			t.Parallel()
			h := setup(t)
			if h.Runner == nil || h.RunnerAt == nil || h.Store == nil {
				t.Fatalf("setup returned an incomplete harness: %+v", h)
			}
			tc.run(t, h)
		})
	}
}

func testAppendToNewStream(t *testing.T, h Harness) {
	for i, expected := range []eventstore.Expected{eventstore.NoStream, eventstore.Any, eventstore.Exactly(0)} {
		stream := fmt.Sprintf("new-%d", i)
		events := newEvents(t, 2)
		got := mustAppend(t, h, stream, expected, events...)
		if len(got) != 2 {
			t.Fatalf("Append(%s, %d) returned %d events, want 2", stream, expected, len(got))
		}
		for i, e := range got {
			want := events[i]
			want.Stream, want.Version = stream, int64(i+1)
			assertEvent(t, fmt.Sprintf("Append(%s, %d)[%d]", stream, expected, i), e, want)
			if e.Position != (eventstore.Position{}) {
				t.Errorf("Append(%s, %d)[%d].Position = %+v, want zero", stream, expected, i, e.Position)
			}
		}
		assertStream(t, h, stream, events...)
	}
}

func testVersionsContinue(t *testing.T, h Harness) {
	first, second, third := newEvents(t, 2), newEvents(t, 1), newEvents(t, 2)
	mustAppend(t, h, "s", eventstore.NoStream, first...)
	if got := mustAppend(t, h, "s", eventstore.Exactly(2), second...); got[0].Version != 3 {
		t.Errorf("Append at Exactly(2) numbered the event %d, want 3", got[0].Version)
	}
	got := mustAppend(t, h, "s", eventstore.Any, third...)
	if got[0].Version != 4 || got[1].Version != 5 {
		t.Errorf("Append at Any numbered the events %d and %d, want 4 and 5", got[0].Version, got[1].Version)
	}
	assertStream(t, h, "s", slices.Concat(first, second, third)...)
}

func testConcurrencyMismatch(t *testing.T, h Harness) {
	mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 2)...)
	for _, tc := range []struct {
		name     string
		stream   string
		expected eventstore.Expected
	}{
		{"NoStream on an existing stream", "s", eventstore.NoStream},
		{"Exactly(0) on an existing stream", "s", eventstore.Exactly(0)},
		{"a version behind the stream", "s", eventstore.Exactly(1)},
		{"a version ahead of the stream", "s", eventstore.Exactly(3)},
		{"a version on a missing stream", "missing", eventstore.Exactly(1)},
	} {
		_, err := tryAppend(t, h, tc.stream, tc.expected, newEvents(t, 1)...)
		if !errors.Is(err, eventstore.ErrConcurrency) {
			t.Errorf("%s: Append error = %v, want ErrConcurrency", tc.name, err)
		}
	}
}

func testFailedAppendWritesNothing(t *testing.T, h Harness) {
	before := mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 1)...)
	// tryAppend commits despite the error, so nothing may have been written.
	if _, err := tryAppend(t, h, "s", eventstore.Exactly(5), newEvents(t, 2)...); !errors.Is(err, eventstore.ErrConcurrency) {
		t.Fatalf("Append at a wrong version: error = %v, want ErrConcurrency", err)
	}
	if _, err := tryAppend(t, h, "new", eventstore.Exactly(1), newEvents(t, 2)...); !errors.Is(err, eventstore.ErrConcurrency) {
		t.Fatalf("Append to a missing stream at version 1: error = %v, want ErrConcurrency", err)
	}
	assertStream(t, h, "s", before...)
	assertStream(t, h, "new")
}

func testIdempotentReappend(t *testing.T, h Harness) {
	events := newEvents(t, 2)
	first := mustAppend(t, h, "s", eventstore.NoStream, events...)
	// NoStream is stale now, and Exactly(2) names the version after the
	// events: a retried append that had committed must succeed either way.
	for _, expected := range []eventstore.Expected{eventstore.NoStream, eventstore.Exactly(2), eventstore.Any} {
		again, err := tryAppend(t, h, "s", expected, events...)
		if err != nil {
			t.Fatalf("re-append at %d: %v", expected, err)
		}
		if len(again) != len(first) {
			t.Fatalf("re-append at %d returned %d events, want %d", expected, len(again), len(first))
		}
		for i := range first {
			assertEvent(t, fmt.Sprintf("re-append at %d [%d]", expected, i), again[i], first[i])
		}
	}
	// A subset of stored events is also all stored.
	if again, err := tryAppend(t, h, "s", eventstore.NoStream, events[1]); err != nil {
		t.Fatalf("re-append of the second event: %v", err)
	} else if len(again) != 1 {
		t.Fatalf("re-append of the second event returned %d events, want 1", len(again))
	} else {
		assertEvent(t, "re-append of the second event", again[0], first[1])
	}
	assertStream(t, h, "s", events...)
}

func testIdempotentInSameUnitOfWork(t *testing.T, h Harness) {
	events := newEvents(t, 1)
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		if _, err := h.Store.Append(ctx, tx, "s", eventstore.NoStream, events...); err != nil {
			return err
		}
		again, err := h.Store.Append(ctx, tx, "s", eventstore.NoStream, events...)
		if err != nil {
			return fmt.Errorf("re-append in the same unit of work: %w", err)
		}
		if len(again) != 1 || again[0].ID != events[0].ID || again[0].Version != 1 {
			return fmt.Errorf("re-append in the same unit of work returned %v, want the event at version 1", describe(again))
		}
		return nil
	})
	assertStream(t, h, "s", events...)
}

func testDuplicateEvent(t *testing.T, h Harness) {
	stored := newEvents(t, 2)
	mustAppend(t, h, "s", eventstore.NoStream, stored...)
	fresh := newEvents(t, 1)[0]
	for _, tc := range []struct {
		name     string
		stream   string
		expected eventstore.Expected
		events   []eventstore.Event
	}{
		{"partial overlap", "s", eventstore.Any, []eventstore.Event{stored[1], fresh}},
		{"partial overlap at the current version", "s", eventstore.Exactly(2), []eventstore.Event{fresh, stored[0]}},
		{"an ID stored in another stream", "other", eventstore.NoStream, []eventstore.Event{stored[0]}},
		{"an ID stored in another stream, with a new one", "other", eventstore.Any, []eventstore.Event{fresh, stored[1]}},
		{"one ID given twice", "other", eventstore.NoStream, []eventstore.Event{fresh, fresh}},
	} {
		if _, err := tryAppend(t, h, tc.stream, tc.expected, tc.events...); !errors.Is(err, eventstore.ErrDuplicateEvent) {
			t.Errorf("%s: Append error = %v, want ErrDuplicateEvent", tc.name, err)
		}
	}
	assertStream(t, h, "s", stored...)
	assertStream(t, h, "other")
}

func testInvalidEvent(t *testing.T, h Harness) {
	valid := func() eventstore.Event { return newEvents(t, 1)[0] }
	noID, noType, notJSON, noData := valid(), valid(), valid(), valid()
	noID.ID = uuid.Nil
	noType.Type = ""
	notJSON.Data = []byte(`{"a":`)
	noData.Data = nil
	for _, tc := range []struct {
		name   string
		stream string
		event  eventstore.Event
	}{
		{"nil ID", "s", noID},
		{"empty type", "s", noType},
		{"data that is not JSON", "s", notJSON},
		{"no data", "s", noData},
		{"empty stream name", "", valid()},
	} {
		// A valid event first: nothing at all may be written.
		_, err := tryAppend(t, h, tc.stream, eventstore.Any, valid(), tc.event)
		if !errors.Is(err, eventstore.ErrInvalidEvent) {
			t.Errorf("%s: Append error = %v, want ErrInvalidEvent", tc.name, err)
		}
		assertStream(t, h, tc.stream)
	}
}

func testRolledBackAppend(t *testing.T, h Harness) {
	events := newEvents(t, 2)
	errAbort := errors.New("abort the unit of work")
	err := h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if _, err := h.Store.Append(ctx, tx, "s", eventstore.NoStream, events...); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		if got, err := h.Store.Load(ctx, tx, "s", 0); err != nil || len(got) != 2 {
			return fmt.Errorf("load inside the unit of work: %d events, error %v; want 2 events", len(got), err)
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatalf("Do error = %v, want the unit of work's error", err)
	}
	assertStream(t, h, "s")
	// The IDs were never stored, so they can be appended now.
	mustAppend(t, h, "s", eventstore.NoStream, events...)
	assertStream(t, h, "s", events...)
}

func testLoad(t *testing.T, h Harness) {
	events := newEvents(t, 4)
	mustAppend(t, h, "s", eventstore.NoStream, events[:2]...)
	mustAppend(t, h, "s", eventstore.Exactly(2), events[2:]...)
	mustAppend(t, h, "other", eventstore.NoStream, newEvents(t, 1)...)

	all := load(t, h, "s", 0)
	assertIDs(t, "Load(s, 0)", all, events...)
	for i, e := range all {
		if e.Version != int64(i+1) || e.Stream != "s" {
			t.Errorf("Load(s, 0)[%d] is %s version %d, want s version %d", i, e.Stream, e.Version, i+1)
		}
		if !(eventstore.Position{}).Less(e.Position) {
			t.Errorf("Load(s, 0)[%d].Position = %+v, want after the zero Position", i, e.Position)
		}
		if i > 0 && !all[i-1].Position.Less(e.Position) {
			t.Errorf("Load(s, 0): version %d at %+v is not after version %d at %+v",
				e.Version, e.Position, all[i-1].Version, all[i-1].Position)
		}
	}
	assertIDs(t, "Load(s, 1)", load(t, h, "s", 1), events...)
	assertIDs(t, "Load(s, 3)", load(t, h, "s", 3), events[2:]...)
	assertIDs(t, "Load(s, 4)", load(t, h, "s", 4), events[3])
	assertIDs(t, "Load(s, 5)", load(t, h, "s", 5))
	assertIDs(t, "Load(missing, 0)", load(t, h, "missing", 0))
}

func testRecordedAt(t *testing.T, h Harness) {
	var now time.Time
	var appended []eventstore.Event
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		now = tx.Now()
		var err error
		appended, err = h.Store.Append(ctx, tx, "s", eventstore.NoStream, newEvents(t, 2)...)
		return err
	})
	if now.IsZero() {
		t.Fatal("the unit of work's Now is zero")
	}
	for i, e := range appended {
		if !e.RecordedAt.Equal(now) {
			t.Errorf("Append[%d].RecordedAt = %s, want the unit of work's Now %s", i, e.RecordedAt, now)
		}
	}
	for i, e := range load(t, h, "s", 0) {
		if !e.RecordedAt.Equal(now) {
			t.Errorf("Load[%d].RecordedAt = %s, want the unit of work's Now %s", i, e.RecordedAt, now)
		}
	}
}

func testMetadataRoundTrip(t *testing.T, h Harness) {
	full, empty := newEvents(t, 1)[0], newEvents(t, 1)[0]
	full.Metadata = eventstore.Metadata{
		CorrelationID: "req-1",
		CausationID:   "cmd-2",
		Extra:         map[string]string{"tenant": "acme", "note": `quotes " and 'ünïcode'`},
	}
	mustAppend(t, h, "s", eventstore.NoStream, full, empty)
	got := load(t, h, "s", 0)
	assertIDs(t, "Load", got, full, empty)
	for i, want := range []eventstore.Metadata{full.Metadata, {}} {
		if !reflect.DeepEqual(got[i].Metadata, want) {
			t.Errorf("Load[%d].Metadata = %+v, want %+v", i, got[i].Metadata, want)
		}
	}
}

func testDataRoundTrip(t *testing.T, h Harness) {
	bodies := []string{
		`{"b":1,"a":[1,2.5,{"z":null,"y":true}],"s":"héllo \"world\" \u00e9 \n"}`,
		`"just a string"`,
		`12345678901234`,
		`[]`,
		`null`,
	}
	events := newEvents(t, len(bodies))
	for i, b := range bodies {
		events[i].Data = []byte(b)
	}
	mustAppend(t, h, "s", eventstore.NoStream, events...)
	got := load(t, h, "s", 0)
	assertIDs(t, "Load", got, events...)
	for i := range got {
		assertEvent(t, fmt.Sprintf("Load[%d]", i), got[i], events[i])
	}
}

func testReadAllCommitOrder(t *testing.T, h Harness) {
	a, b, c := newEvents(t, 2), newEvents(t, 1), newEvents(t, 1)
	mustAppend(t, h, "a", eventstore.NoStream, a...)
	mustAppend(t, h, "b", eventstore.NoStream, b...)
	mustAppend(t, h, "a", eventstore.Exactly(2), c...)
	var both []eventstore.Event
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		for _, stream := range []string{"c", "d"} {
			events := newEvents(t, 1)
			if _, err := h.Store.Append(ctx, tx, stream, eventstore.NoStream, events...); err != nil {
				return err
			}
			both = append(both, events...)
		}
		return nil
	})
	want := slices.Concat(a, b, c, both)
	got := readAllUntil(t, h, eventstore.Position{}, len(want))
	assertIDs(t, "ReadAll", got, want...)
	streams := []string{"a", "a", "b", "a", "c", "d"}
	for i, e := range got {
		if e.Stream != streams[i] {
			t.Errorf("ReadAll[%d].Stream = %q, want %q", i, e.Stream, streams[i])
		}
		assertEvent(t, fmt.Sprintf("ReadAll[%d]", i), e, want[i])
		if i > 0 && !got[i-1].Position.Less(e.Position) {
			t.Errorf("ReadAll[%d].Position %+v is not after ReadAll[%d].Position %+v", i, e.Position, i-1, got[i-1].Position)
		}
	}
	// ReadAll and Load agree on where events are.
	for _, e := range load(t, h, "a", 0) {
		i := slices.IndexFunc(got, func(g eventstore.Event) bool { return g.ID == e.ID })
		if got[i].Position != e.Position {
			t.Errorf("event %s: ReadAll says Position %+v, Load says %+v", e.ID, got[i].Position, e.Position)
		}
	}
}

func testReadAllResume(t *testing.T, h Harness) {
	want := appendAcrossStreams(t, h)
	all := readAllUntil(t, h, eventstore.Position{}, len(want))
	assertIDs(t, "ReadAll from the start", all, want...)
	// Page through the log with several page sizes; each page resumes after
	// the last event of the one before.
	for _, limit := range []int{1, 2, 4} {
		var paged []eventstore.Event
		after := eventstore.Position{}
		for range len(want) + 1 {
			page := readAll(t, h, after, limit)
			if len(page) > limit {
				t.Fatalf("ReadAll(limit %d) returned %d events", limit, len(page))
			}
			if len(page) == 0 {
				break
			}
			paged = append(paged, page...)
			after = page[len(page)-1].Position
		}
		assertIDs(t, fmt.Sprintf("ReadAll in pages of %d", limit), paged, want...)
	}
	// Resuming from the middle and from the end.
	assertIDs(t, "ReadAll after the third event", readAll(t, h, all[2].Position, 100), want[3:]...)
	assertIDs(t, "ReadAll after the last event", readAll(t, h, all[len(all)-1].Position, 100))
}

func testReadAllLimit(t *testing.T, h Harness) {
	events := newEvents(t, 3)
	mustAppend(t, h, "s", eventstore.NoStream, events...)
	readAllUntil(t, h, eventstore.Position{}, len(events))
	assertIDs(t, "ReadAll(limit 2)", readAll(t, h, eventstore.Position{}, 2), events[:2]...)
	assertIDs(t, "ReadAll(limit 1)", readAll(t, h, eventstore.Position{}, 1), events[0])
	wantLimitRefused(t, h, "ReadAll", h.Store.ReadAll)
}

// wantLimitRefused checks that read, the method called name, returns an
// error for a limit below 1.
func wantLimitRefused(t *testing.T, h Harness, name string, read readFunc) {
	t.Helper()
	for _, limit := range []int{0, -1} {
		err := h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			_, err := read(ctx, tx, eventstore.Position{}, limit)
			return err
		})
		if err == nil {
			t.Errorf("%s(limit %d) returned no error", name, limit)
		}
	}
}

// testRacingAppends starts two units of work that both read the stream at
// version 1 and append at Exactly(1): one must win and the other get
// ErrConcurrency.
func testRacingAppends(t *testing.T, h Harness) {
	mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 1)...)
	const racers = 2
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	errs := make([]error, racers)
	events := make([]eventstore.Event, racers)
	for i := range racers {
		events[i] = newEvents(t, 1)[0]
		ready.Add(1)
		markReady := sync.OnceFunc(ready.Done)
		done.Go(func() {
			defer markReady() // Also when Do fails before it calls fn.
			errs[i] = h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
				stored, err := h.Store.Load(ctx, tx, "s", 0)
				markReady()
				if err != nil {
					return err
				}
				<-start
				_, err = h.Store.Append(ctx, tx, "s", eventstore.Exactly(int64(len(stored))), events[i])
				return err
			})
		})
	}
	ready.Wait()
	close(start)
	done.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("racers %d and %d both appended at version 1", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, eventstore.ErrConcurrency):
			t.Errorf("racer %d: error = %v, want ErrConcurrency", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no racer appended: %v", errs)
	}
	got := load(t, h, "s", 0)
	if len(got) != 2 || got[1].ID != events[winner].ID {
		t.Fatalf("stream holds %v, want the first event and the winner's %s", describe(got), events[winner].ID)
	}
}

// testAppendWhileOtherOpen appends at a version that a unit of work still
// open has taken. Whether the second append sees the first before or after
// it commits, it must fail with ErrConcurrency and leave nothing, even when
// its unit of work commits.
func testAppendWhileOtherOpen(t *testing.T, h Harness) {
	first := mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 1)...)
	a := hold(t, h, "s", eventstore.Exactly(1))
	bErr := make(chan error, 1)
	bStarted := make(chan struct{})
	bDone := make(chan error, 1)
	go func() {
		bDone <- h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			close(bStarted)
			_, err := h.Store.Append(ctx, tx, "s", eventstore.Exactly(1), newEvents(t, 2)...)
			bErr <- err
			return nil // Commit anyway: the failed append must have written nothing.
		})
	}()
	select {
	case <-bStarted:
	case err := <-bDone:
		t.Fatalf("the second unit of work ended before it appended: %v", err)
	}
	a.commit(t)
	if err := <-bDone; err != nil {
		t.Fatalf("the second unit of work: %v", err)
	}
	if err := <-bErr; !errors.Is(err, eventstore.ErrConcurrency) {
		t.Fatalf("the second append: error = %v, want ErrConcurrency", err)
	}
	assertStream(t, h, "s", append(first, a.events...)...)
}

// testReadAllWaitsForInFlight holds unit of work A open after it appended,
// commits B, and checks that ReadAll does not return B's event while A may
// still commit an event before it: a reader that checkpointed B would never
// see A's. A then appends once more, after B, and commits; the log orders
// events by transaction, so both of A's come before B's.
func testReadAllWaitsForInFlight(t *testing.T, h Harness) {
	a := hold(t, h, "a", eventstore.NoStream)
	b := newEvents(t, 1)
	mustAppend(t, h, "b", eventstore.NoStream, b...)
	assertStream(t, h, "b", b...) // B is committed.
	if got := readAll(t, h, eventstore.Position{}, 10); len(got) != 0 {
		t.Fatalf("ReadAll returned %v while A, which began before B, was still open", describe(got))
	}
	a.commit(t, newEvents(t, 1)...)
	got := readAllUntil(t, h, eventstore.Position{}, 3)
	assertIDs(t, "ReadAll after A committed", got, append(a.events, b...)...)
}

// held is a unit of work that has appended to its stream and waits to
// commit.
type held struct {
	// events are what it appended, and after commit what it committed.
	events []eventstore.Event
	more   chan []eventstore.Event
	once   sync.Once
	done   chan error
}

// ReadCommitted returns the log, once nothing is in flight, as ReadAll
// does: the same events in the same order at the same positions, resumed
// after a position and kept to a limit.
func testReadCommittedAsReadAll(t *testing.T, h Harness) {
	want := appendAcrossStreams(t, h)
	all := readAllUntil(t, h, eventstore.Position{}, len(want))
	got := readCommitted(t, h, eventstore.Position{}, 100)
	assertIDs(t, "ReadCommitted", got, want...)
	for i, e := range got {
		assertEvent(t, fmt.Sprintf("ReadCommitted[%d]", i), e, all[i])
		if e.Position != all[i].Position {
			t.Errorf("ReadCommitted[%d].Position = %+v, want %+v as ReadAll returns it", i, e.Position, all[i].Position)
		}
	}
	assertIDs(t, "ReadCommitted(limit 2)", readCommitted(t, h, eventstore.Position{}, 2), want[:2]...)
	assertIDs(t, "ReadCommitted after the third event", readCommitted(t, h, all[2].Position, 100), want[3:]...)
	assertIDs(t, "ReadCommitted after the last event", readCommitted(t, h, all[len(all)-1].Position, 100))
	wantLimitRefused(t, h, "ReadCommitted", h.Store.ReadCommitted)
}

// ReadCommitted returns what is committed at once, without waiting for a
// transaction in flight, and that transaction's events once it commits, in
// the order of ReadAll.
func testReadCommittedPassesInFlight(t *testing.T, h Harness) {
	a := hold(t, h, "a", eventstore.NoStream)
	b := newEvents(t, 1)
	mustAppend(t, h, "b", eventstore.NoStream, b...)
	assertIDs(t, "ReadCommitted while A is open", readCommitted(t, h, eventstore.Position{}, 10), b...)
	a.commit(t)
	assertIDs(t, "ReadCommitted after A committed", readCommitted(t, h, eventstore.Position{}, 10), append(a.events, b...)...)
}

// Lock holds a stream, stored or not, for its unit of work, which can lock
// it again and then load it and append to it as usual; the lock ends with
// the unit of work, so the next one takes it.
func testLock(t *testing.T, h Harness) {
	first := mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 1)...)
	more, created := newEvents(t, 1), newEvents(t, 1)
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		for _, stream := range []string{"s", "missing", "s"} {
			if err := h.Store.Lock(ctx, tx, stream); err != nil {
				return fmt.Errorf("Lock(%s): %w", stream, err)
			}
		}
		got, err := h.Store.Load(ctx, tx, "s", 1)
		if err != nil {
			return err
		}
		if _, err := h.Store.Append(ctx, tx, "s", eventstore.Exactly(int64(len(got))), more...); err != nil {
			return fmt.Errorf("Append(s) after Lock(s): %w", err)
		}
		if _, err := h.Store.Append(ctx, tx, "missing", eventstore.NoStream, created...); err != nil {
			return fmt.Errorf("Append(missing) after Lock(missing): %w", err)
		}
		return nil
	})
	assertStream(t, h, "s", append(first, more...)...)
	assertStream(t, h, "missing", created...)
	do(t, h, func(ctx context.Context, tx uow.Tx) error { return h.Store.Lock(ctx, tx, "s") })
}

// truncate runs Truncate in a committed unit of work and checks how many
// events it deleted.
func truncate(t *testing.T, h Harness, stream string, before int64, want int64) {
	t.Helper()
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		n, err := h.Store.Truncate(ctx, tx, stream, before)
		if err != nil {
			return fmt.Errorf("Truncate(%s, %d): %w", stream, before, err)
		}
		if n != want {
			t.Errorf("Truncate(%s, %d) deleted %d events, want %d", stream, before, n, want)
		}
		return nil
	})
}

// Truncate deletes the events below the version and no other stream's,
// never the last one, so the stream's version goes on: the next append
// numbers from it, and an append at a stale version still fails.
func testTruncateKeepsTheVersion(t *testing.T, h Harness) {
	events := newEvents(t, 4)
	mustAppend(t, h, "s", eventstore.NoStream, events...)
	other := mustAppend(t, h, "other", eventstore.NoStream, newEvents(t, 2)...)

	truncate(t, h, "s", 3, 2)
	assertIDs(t, "Load(s) after Truncate(s, 3)", load(t, h, "s", 0), events[2:]...)
	truncate(t, h, "s", 3, 0)
	// Past the head: everything but the last event.
	truncate(t, h, "s", 100, 1)
	assertIDs(t, "Load(s) after Truncate(s, 100)", load(t, h, "s", 0), events[3])
	truncate(t, h, "missing", 100, 0)
	assertStream(t, h, "other", other...)

	var head int64
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		var err error
		_, head, err = h.Store.LoadSince(ctx, tx, "s", time.Now().Add(time.Hour))
		return err
	})
	if head != 4 {
		t.Errorf("LoadSince(s) head after truncation = %d, want 4", head)
	}
	more := newEvents(t, 1)
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		if _, err := h.Store.Append(ctx, tx, "s", eventstore.Exactly(1), newEvents(t, 1)...); !errors.Is(err, eventstore.ErrConcurrency) {
			t.Errorf("Append(s) at a stale version after truncation: %v, want ErrConcurrency", err)
		}
		return nil
	})
	got := mustAppend(t, h, "s", eventstore.Exactly(4), more...)
	if got[0].Version != 5 {
		t.Errorf("the append after truncation is version %d, want 5", got[0].Version)
	}
}

// A truncated event is gone from the log too: ReadAll and ReadCommitted
// pass over it, and what is left keeps its position.
func testTruncateGoneForEveryReader(t *testing.T, h Harness) {
	events := newEvents(t, 3)
	mustAppend(t, h, "s", eventstore.NoStream, events...)
	before := readAllUntil(t, h, eventstore.Position{}, 3)
	truncate(t, h, "s", 3, 2)
	after := readAllUntil(t, h, eventstore.Position{}, 1)
	assertIDs(t, "ReadAll after truncation", after, events[2])
	if len(before) == 3 && len(after) == 1 && after[0].Position != before[2].Position {
		t.Errorf("the kept event moved in the log: %+v, was %+v", after[0].Position, before[2].Position)
	}
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		got, err := h.Store.ReadCommitted(ctx, tx, eventstore.Position{}, 10)
		assertIDs(t, "ReadCommitted after truncation", got, events[2])
		return err
	})
}

// Truncate changes the log, so a read-only unit of work refuses it.
func testTruncateReadOnly(t *testing.T, h Harness) {
	mustAppend(t, h, "s", eventstore.NoStream, newEvents(t, 2)...)
	err := h.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		_, err := h.Store.Truncate(ctx, tx, "s", 2)
		return err
	})
	if !errors.Is(err, uow.ErrReadOnly) {
		t.Errorf("Truncate in a read-only unit of work: %v, want ErrReadOnly", err)
	}
	if got := load(t, h, "s", 0); len(got) != 2 {
		t.Errorf("the refused truncation deleted events: %d left, want 2", len(got))
	}
}

// tailBase is the time at which the LoadSince cases record events: any fixed
// time would do, but not one on a whole second, nor on a whole
// millisecond, so that a backend that keeps less than microseconds fails.
var tailBase = time.Date(2031, time.March, 4, 5, 6, 7, 123456000, time.UTC)

// LoadSince returns the events of the stream recorded at or after since,
// compared to the nanosecond, with all their fields as Load returns them,
// and the stream's head whether or not any event is recent.
func testLoadSince(t *testing.T, h Harness) {
	t0, t1, t2 := tailBase, tailBase.Add(time.Minute), tailBase.Add(2*time.Minute)
	appendAt(t, h, t0, "s", eventstore.NoStream, newEvents(t, 2)...)
	appendAt(t, h, t1, "s", eventstore.Exactly(2), newEvents(t, 2)...)
	appendAt(t, h, t2, "s", eventstore.Exactly(4), newEvents(t, 1)...)
	// Another stream, whose name starts with this one's, with events at
	// every time, which must never show.
	for _, at := range []time.Time{t0, t1, t2} {
		appendAt(t, h, at, "s2", eventstore.Any, newEvents(t, 1)...)
	}
	all := load(t, h, "s", 0)
	if len(all) != 5 {
		t.Fatalf("Load(s) returned %d events, want 5", len(all))
	}
	for i, at := range []time.Time{t0, t0, t1, t1, t2} {
		if !all[i].RecordedAt.Equal(at) {
			t.Fatalf("Load(s)[%d].RecordedAt = %s, want %s", i, all[i].RecordedAt, at)
		}
	}
	for _, tc := range []struct {
		name  string
		since time.Time
		want  []eventstore.Event
	}{
		{"the zero time", time.Time{}, all},
		{"the first events' time", t0, all},
		{"a second after the first events", t0.Add(time.Second), all[2:]},
		{"a microsecond before the middle events", t1.Add(-time.Microsecond), all[2:]},
		{"the middle events' time", t1, all[2:]},
		{"the middle events' time in another zone", t1.In(time.FixedZone("UTC-5", -5*60*60)), all[2:]},
		{"a nanosecond after the middle events", t1.Add(time.Nanosecond), all[4:]},
		{"a microsecond after the middle events", t1.Add(time.Microsecond), all[4:]},
		{"the last event's time", t2, all[4:]},
		{"a nanosecond after the last event", t2.Add(time.Nanosecond), nil},
		{"an hour after the last event", t2.Add(time.Hour), nil},
	} {
		got, version := loadSince(t, h, "s", tc.since)
		what := fmt.Sprintf("LoadSince(s, %s)", tc.name)
		if version != 5 {
			t.Errorf("%s: version = %d, want the head 5", what, version)
		}
		assertIDs(t, what, got, tc.want...)
		for i, e := range got {
			assertEvent(t, fmt.Sprintf("%s[%d]", what, i), e, tc.want[i])
			if e.Position != tc.want[i].Position {
				t.Errorf("%s[%d].Position = %+v, want %+v as Load returns it", what, i, e.Position, tc.want[i].Position)
			}
		}
	}
	for _, since := range []time.Time{time.Time{}, t2.Add(time.Hour)} {
		got, version := loadSince(t, h, "missing", since)
		if len(got) != 0 || version != 0 {
			t.Errorf("LoadSince(missing, %s) returned %v and version %d, want nothing and 0", since, describe(got), version)
		}
	}
}

// LoadSince returns the stretch after the last event recorded before
// since, in version order, when the times do not grow with the versions,
// as when units of work on different machines read clocks that disagree:
// a recent event that a later version recorded before since follows is
// left out, with every event before it, and no event recorded before
// since is ever in.
func testLoadSinceVersionOrder(t *testing.T, h Harness) {
	t0, t1, t2 := tailBase, tailBase.Add(time.Minute), tailBase.Add(2*time.Minute)
	times := []time.Time{t2, t0, t2, t1, t2, t1}
	var events []eventstore.Event
	for i, at := range times {
		events = append(events, appendAt(t, h, at, "s", eventstore.Exactly(int64(i)), newEvents(t, 1)...)...)
	}
	for _, tc := range []struct {
		name  string
		since time.Time
		want  []eventstore.Event
	}{
		{"t1, after the second event's t0", t1, events[2:]},
		{"t2, after the sixth event's t1", t2, nil},
		{"t0, before every event", t0, events},
		{"a microsecond after t0", t0.Add(time.Microsecond), events[2:]},
	} {
		got, version := loadSince(t, h, "s", tc.since)
		what := fmt.Sprintf("LoadSince(s, %s)", tc.name)
		assertIDs(t, what, got, tc.want...)
		for i := range got {
			if want := tc.want[i].Version; got[i].Version != want {
				t.Errorf("%s[%d].Version = %d, want %d", what, i, got[i].Version, want)
			}
		}
		if version != int64(len(times)) {
			t.Errorf("%s: version = %d, want the head %d", what, version, len(times))
		}
	}
}

// An append at the version LoadSince returns succeeds, also when no event
// is recent or the stream is missing, and fails with ErrConcurrency once
// another append has moved the stream, even if that append is not recent
// either.
func testLoadSinceHeadForAppend(t *testing.T, h Harness) {
	old := appendAt(t, h, tailBase, "s", eventstore.NoStream, newEvents(t, 3)...)
	now := tailBase.Add(time.Hour)
	since := now.Add(-15 * time.Minute)

	// Nothing is recent: the version is still the head, and appending at it
	// succeeds.
	fresh := newEvents(t, 1)
	doAt(t, h, now, func(ctx context.Context, tx uow.Tx) error {
		got, version, err := h.Store.LoadSince(ctx, tx, "s", since)
		if err != nil {
			return err
		}
		if len(got) != 0 || version != 3 {
			return fmt.Errorf("LoadSince(s) returned %v and version %d, want nothing and 3", describe(got), version)
		}
		appended, err := h.Store.Append(ctx, tx, "s", eventstore.Exactly(version), fresh...)
		if err != nil {
			return fmt.Errorf("Append at the version LoadSince returned: %w", err)
		}
		if appended[0].Version != 4 {
			return fmt.Errorf("Append at the version LoadSince returned numbered the event %d, want 4", appended[0].Version)
		}
		return nil
	})

	// A version read before another append, an old one, is stale.
	var version int64
	doAt(t, h, now, func(ctx context.Context, tx uow.Tx) error {
		var err error
		_, version, err = h.Store.LoadSince(ctx, tx, "s", since)
		return err
	})
	if version != 4 {
		t.Fatalf("LoadSince(s): version = %d, want 4", version)
	}
	moved := appendAt(t, h, tailBase, "s", eventstore.Exactly(4), newEvents(t, 1)...)
	var appendErr error
	doAt(t, h, now, func(ctx context.Context, tx uow.Tx) error {
		_, appendErr = h.Store.Append(ctx, tx, "s", eventstore.Exactly(version), newEvents(t, 1)...)
		return nil // Commit anyway: the failed append must write nothing.
	})
	if !errors.Is(appendErr, eventstore.ErrConcurrency) {
		t.Errorf("Append at a version LoadSince returned before another append: error = %v, want ErrConcurrency", appendErr)
	}
	assertStream(t, h, "s", slices.Concat(old, fresh, moved)...)

	// A missing stream is at version 0.
	created := newEvents(t, 1)
	doAt(t, h, now, func(ctx context.Context, tx uow.Tx) error {
		got, version, err := h.Store.LoadSince(ctx, tx, "missing", since)
		if err != nil {
			return err
		}
		if len(got) != 0 || version != 0 {
			return fmt.Errorf("LoadSince(missing) returned %v and version %d, want nothing and 0", describe(got), version)
		}
		_, err = h.Store.Append(ctx, tx, "missing", eventstore.Exactly(version), created...)
		return err
	})
	assertStream(t, h, "missing", created...)
}

// A unit of work that read the head with LoadSince and appends at it after
// another unit of work appended and committed meanwhile gets
// ErrConcurrency.
func testLoadSinceConcurrentAppend(t *testing.T, h Harness) {
	old := appendAt(t, h, tailBase, "s", eventstore.NoStream, newEvents(t, 2)...)
	now := tailBase.Add(time.Hour)
	read, moved := make(chan struct{}), make(chan struct{})
	var appendErr error
	done := make(chan error, 1)
	go func() {
		done <- h.RunnerAt(func() time.Time { return now }).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			_, version, err := h.Store.LoadSince(ctx, tx, "s", now.Add(-15*time.Minute))
			close(read)
			if err != nil {
				return err
			}
			if version != 2 {
				return fmt.Errorf("LoadSince(s): version = %d, want 2", version)
			}
			select {
			case <-moved:
			case <-ctx.Done():
				return ctx.Err()
			}
			_, appendErr = h.Store.Append(ctx, tx, "s", eventstore.Exactly(version), newEvents(t, 1)...)
			return nil // Commit anyway: the failed append must write nothing.
		})
	}()
	select {
	case <-read:
	case err := <-done:
		t.Fatalf("the unit of work ended before it loaded: %v", err)
	}
	other := appendAt(t, h, now, "s", eventstore.Exactly(2), newEvents(t, 1)...)
	close(moved)
	if err := <-done; err != nil {
		t.Fatalf("the unit of work that loaded first: %v", err)
	}
	if !errors.Is(appendErr, eventstore.ErrConcurrency) {
		t.Errorf("Append at the version LoadSince returned, after a concurrent append: error = %v, want ErrConcurrency", appendErr)
	}
	assertStream(t, h, "s", append(old, other...)...)
}

// doAt runs fn in a unit of work whose time is now, and fails t on an error.
func doAt(t *testing.T, h Harness, now time.Time, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	if err := h.RunnerAt(func() time.Time { return now }).Do(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// appendAt appends events in a unit of work of their own whose time is
// now, and fails t on an error.
func appendAt(t *testing.T, h Harness, now time.Time, stream string, expected eventstore.Expected, events ...eventstore.Event) []eventstore.Event {
	t.Helper()
	var got []eventstore.Event
	doAt(t, h, now, func(ctx context.Context, tx uow.Tx) error {
		var err error
		got, err = h.Store.Append(ctx, tx, stream, expected, events...)
		if err != nil {
			return fmt.Errorf("Append(%s, %d) at %s: %w", stream, expected, now, err)
		}
		return nil
	})
	for i, e := range got {
		if !e.RecordedAt.Equal(now) {
			t.Fatalf("Append(%s, %d)[%d].RecordedAt = %s, want the unit of work's time %s", stream, expected, i, e.RecordedAt, now)
		}
	}
	return got
}

// loadSince calls LoadSince in a unit of work of its own.
func loadSince(t *testing.T, h Harness, stream string, since time.Time) ([]eventstore.Event, int64) {
	t.Helper()
	var got []eventstore.Event
	var version int64
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		var err error
		got, version, err = h.Store.LoadSince(ctx, tx, stream, since)
		return err
	})
	return got, version
}

// hold starts a unit of work that appends one event to stream at expected
// and then stays open until commit is called, or t ends.
func hold(t *testing.T, h Harness, stream string, expected eventstore.Expected) *held {
	t.Helper()
	hd := &held{
		events: newEvents(t, 1),
		more:   make(chan []eventstore.Event, 1),
		done:   make(chan error, 1),
	}
	// Registered after setup's cleanups, so it runs before them: the
	// backend is not closed while the unit of work holds a connection.
	t.Cleanup(func() { hd.release(nil) })
	appended := make(chan error, 1)
	go func() {
		hd.done <- h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			_, err := h.Store.Append(ctx, tx, stream, expected, hd.events...)
			appended <- err
			if err != nil {
				return err
			}
			if more := <-hd.more; len(more) > 0 {
				_, err = h.Store.Append(ctx, tx, stream, eventstore.Any, more...)
			}
			return err
		})
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatalf("held unit of work: append to %s: %v", stream, err)
		}
	case err := <-hd.done:
		t.Fatalf("held unit of work ended before it appended: %v", err)
	}
	return hd
}

// loseToHeld runs, in a second unit of work, fn, which appends to the
// stream that a holds, then lets a commit, and checks that the second
// fails with ErrConcurrency.
func loseToHeld(t *testing.T, h Harness, a *held, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	bDone := make(chan error, 1)
	bStarted := make(chan struct{})
	go func() {
		bDone <- h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			close(bStarted)
			return fn(ctx, tx)
		})
	}()
	select {
	case <-bStarted:
	case err := <-bDone:
		t.Fatalf("the second unit of work ended before it appended: %v", err)
	}
	a.commit(t)
	if err := <-bDone; !errors.Is(err, eventstore.ErrConcurrency) {
		t.Fatalf("the second unit of work: %v, want ErrConcurrency", err)
	}
}

// release lets the held unit of work append more and commit; only the
// first call counts.
func (hd *held) release(more []eventstore.Event) {
	hd.once.Do(func() { hd.more <- more })
}

// commit lets the held unit of work append more, commit, and waits until
// it has.
func (hd *held) commit(t *testing.T, more ...eventstore.Event) {
	t.Helper()
	hd.release(more)
	if err := <-hd.done; err != nil {
		t.Fatalf("held unit of work: %v", err)
	}
	hd.events = append(hd.events, more...)
}

// newEvents returns n events of distinct IDs with JSON data.
func newEvents(t *testing.T, n int) []eventstore.Event {
	t.Helper()
	events := make([]eventstore.Event, n)
	for i := range events {
		e, err := eventstore.NewEvent("test.happened", map[string]any{"n": i, "tag": "x"}, eventstore.Metadata{})
		if err != nil {
			t.Fatal(err)
		}
		events[i] = e
	}
	return events
}

// do runs fn in a unit of work and fails t on an error.
func do(t *testing.T, h Harness, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	if err := h.Runner.Do(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// mustAppend appends events in a unit of work of their own and fails t on
// an error.
func mustAppend(t *testing.T, h Harness, stream string, expected eventstore.Expected, events ...eventstore.Event) []eventstore.Event {
	t.Helper()
	got, err := tryAppend(t, h, stream, expected, events...)
	if err != nil {
		t.Fatalf("Append(%s, %d): %v", stream, expected, err)
	}
	return got
}

// tryAppend appends events in a unit of work of their own and returns the
// result of Append. The unit of work commits even when Append fails, which
// the contract allows ("errors leave tx usable"); callers check that a
// failed append wrote nothing.
func tryAppend(t *testing.T, h Harness, stream string, expected eventstore.Expected, events ...eventstore.Event) ([]eventstore.Event, error) {
	t.Helper()
	var got []eventstore.Event
	var appendErr error
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		got, appendErr = h.Store.Append(ctx, tx, stream, expected, events...)
		return nil
	})
	return got, appendErr
}

// load returns the events of stream from version from on.
func load(t *testing.T, h Harness, stream string, from int64) []eventstore.Event {
	t.Helper()
	var got []eventstore.Event
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		var err error
		got, err = h.Store.Load(ctx, tx, stream, from)
		return err
	})
	return got
}

// appendAcrossStreams appends six events to three streams in four units of
// work and returns them in the order they were appended.
func appendAcrossStreams(t *testing.T, h Harness) []eventstore.Event {
	t.Helper()
	var appended []eventstore.Event
	for i := range 4 {
		events := newEvents(t, i%2+1)
		mustAppend(t, h, fmt.Sprintf("s%d", i%3), eventstore.Any, events...)
		appended = append(appended, events...)
	}
	return appended
}

// readFunc is [eventstore.Store.ReadAll] or [eventstore.Store.ReadCommitted].
type readFunc func(ctx context.Context, tx uow.Tx, after eventstore.Position, limit int) ([]eventstore.Event, error)

// readAll reads the log once with ReadAll.
func readAll(t *testing.T, h Harness, after eventstore.Position, limit int) []eventstore.Event {
	t.Helper()
	return readLog(t, h, "ReadAll", h.Store.ReadAll, after, limit)
}

// readCommitted reads the log once with ReadCommitted.
func readCommitted(t *testing.T, h Harness, after eventstore.Position, limit int) []eventstore.Event {
	t.Helper()
	return readLog(t, h, "ReadCommitted", h.Store.ReadCommitted, after, limit)
}

// readLog reads the log once with read, the method called name.
func readLog(t *testing.T, h Harness, name string, read readFunc, after eventstore.Position, limit int) []eventstore.Event {
	t.Helper()
	var got []eventstore.Event
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		var err error
		got, err = read(ctx, tx, after, limit)
		return err
	})
	if len(got) > limit {
		t.Fatalf("%s(limit %d) returned %d events", name, limit, len(got))
	}
	return got
}

// readAllUntil reads the log after position until at least n events are
// returned, and returns them (and any more, up to one, so that callers that
// compare with what they expect notice an extra event). Committed events
// may take a while to be returned; see [visibleWithin].
func readAllUntil(t *testing.T, h Harness, after eventstore.Position, n int) []eventstore.Event {
	t.Helper()
	deadline := time.NewTimer(visibleWithin)
	defer deadline.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		got := readAll(t, h, after, n+1)
		if len(got) >= n {
			return got
		}
		select {
		case <-deadline.C:
			t.Fatalf("ReadAll returned %d of %d committed events within %s: %v (a long transaction elsewhere on the server delays them)",
				len(got), n, visibleWithin, describe(got))
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-poll.C:
		}
	}
}

// assertStream checks that stream holds exactly want, numbered from 1.
func assertStream(t *testing.T, h Harness, stream string, want ...eventstore.Event) {
	t.Helper()
	got := load(t, h, stream, 0)
	assertIDs(t, fmt.Sprintf("Load(%q)", stream), got, want...)
	for i, e := range got {
		if e.Version != int64(i+1) {
			t.Errorf("Load(%q)[%d].Version = %d, want %d", stream, i, e.Version, i+1)
		}
	}
}

// assertIDs checks that got holds the events of want, in that order.
func assertIDs(t *testing.T, what string, got []eventstore.Event, want ...eventstore.Event) {
	t.Helper()
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("%s returned %v, want %v", what, describe(got), describe(want))
	}
}

// assertEvent compares everything but Position; Data as JSON values, since
// a backend may reformat it. Stream and Version are compared when want has
// them; RecordedAt when want has it.
func assertEvent(t *testing.T, what string, got, want eventstore.Event) {
	t.Helper()
	if got.ID != want.ID || got.Type != want.Type {
		t.Errorf("%s is %s of type %q, want %s of type %q", what, got.ID, got.Type, want.ID, want.Type)
	}
	if want.Stream != "" && (got.Stream != want.Stream || got.Version != want.Version) {
		t.Errorf("%s is %s version %d, want %s version %d", what, got.Stream, got.Version, want.Stream, want.Version)
	}
	if !want.RecordedAt.IsZero() && !got.RecordedAt.Equal(want.RecordedAt) {
		t.Errorf("%s.RecordedAt = %s, want %s", what, got.RecordedAt, want.RecordedAt)
	}
	if !reflect.DeepEqual(got.Metadata, want.Metadata) {
		t.Errorf("%s.Metadata = %+v, want %+v", what, got.Metadata, want.Metadata)
	}
	var g, w any
	if err := json.Unmarshal(got.Data, &g); err != nil {
		t.Errorf("%s.Data = %q is not JSON: %v", what, got.Data, err)
		return
	}
	if err := json.Unmarshal(want.Data, &w); err != nil {
		t.Fatalf("%s: the expected data %q is not JSON: %v", what, want.Data, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s.Data = %s, want %s", what, got.Data, want.Data)
	}
}

func ids(events []eventstore.Event) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// describe lists events briefly for failure messages.
func describe(events []eventstore.Event) string {
	parts := make([]string, len(events))
	for i, e := range events {
		parts[i] = fmt.Sprintf("%s@%s/%d", e.ID, e.Stream, e.Version)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
