// Package uowtest is the conformance suite of [uow.Runner] and of the way a
// backend's stores take its [uow.Tx]. Every backend runs it unchanged, as it
// runs the suites of the event store and the outbox:
//
//	func TestRunner(t *testing.T) {
//		t.Parallel()
//		uowtest.Run(t, func(t *testing.T) uowtest.Harness {
//			db := pgtest.New(t)
//			return uowtest.Harness{
//				Runner: func(now func() time.Time) uow.Runner { return db.Runner(now) },
//				Outbox: db.Outbox(),
//				Events: db.Events(),
//			}
//		})
//	}
//
// The suite checks what [uow.Runner.Do] and [uow.Tx] document, and what the
// package comment of [uow] asks of stores:
//
//   - Do commits when its function returns nil, and rolls back when it
//     returns an error, which Do returns as it is, or panics, which Do
//     raises again with the same value once it has rolled back. The runner
//     works as before after either.
//   - Do reads the runner's clock once per unit of work, and [uow.Tx.Now]
//     returns that reading in UTC, truncated to the microsecond, on every
//     call; the stores write that time and read no clock of their own.
//   - Stores refuse a Tx that is not their backend's, nil included, with an
//     error wrapping [uow.ErrForeignTx].
//   - A Tx used after its unit of work ended, committed or rolled back, is
//     an error and writes nothing. Which error is the backend's own: the
//     package uow names none for it.
//   - [uow.Runner.Read] reads the clock once per unit of work as Do does. It
//     sees what was committed before its first read and nothing committed
//     after, not even by a unit of work of Do that commits while it is
//     open. A write through its Tx fails with an error wrapping
//     [uow.ErrReadOnly] and changes nothing, even when the function
//     returns nil after it. Read returns the function's error as it is,
//     raises its panic again, and works as before after either; its Tx is
//     unusable once it returns.
//
// It sees what a unit of work wrote only through the stores: messages
// through [outbox.Store.Claim] at times far in the future, events through
// [eventstore.Store.Load]. It never reads the wall clock.
package uowtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
)

// Harness is what the suite needs of a backend: fresh, empty stores per call.
type Harness struct {
	// Runner returns a runner whose units of work read the time from now.
	Runner func(now func() time.Time) uow.Runner
	// Outbox and Events are stores of the same backend, used to see what a
	// unit of work wrote. They start empty and accept the transactions of
	// the runners of Runner.
	Outbox outbox.Store
	Events eventstore.Store
}

// Run runs the suite. Each case is a parallel subtest that calls setup for
// stores of its own.
func Run(t *testing.T, setup func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			if h.Runner == nil || h.Outbox == nil || h.Events == nil {
				t.Fatalf("setup returned an incomplete harness: %+v", h)
			}
			c.run(t, &suite{Harness: h})
		})
	}
}

// cases lists the suite; each name is "Subject/Behaviour".
var cases = []struct {
	name string
	run  func(t *testing.T, s *suite)
}{
	{"Do/CommitsOnNil", testCommitsOnNil},
	{"Do/RollsBackOnErrorAndReturnsIt", testRollsBackOnError},
	{"Do/RollsBackAndRepanicsOnPanic", testRollsBackOnPanic},
	{"Now/OneClockReadingPerUnitOfWork", testOneClockReading},
	{"Stores/RefuseAForeignTx", testRefuseForeignTx},
	{"Tx/UnusableAfterCommit", testUnusableAfterCommit},
	{"Tx/UnusableAfterRollback", testUnusableAfterRollback},
	{"Read/OneClockReadingPerUnitOfWork", testReadOneClockReading},
	{"Read/OneSnapshotOfCommittedData", testReadSnapshot},
	{"Read/RefusesWritesAndChangesNothing", testReadRefusesWrites},
	{"Read/ReturnsErrorsAndRepanics", testReadErrorsAndPanics},
	{"Read/TxUnusableAfterward", testReadTxUnusableAfterward},
}

// base is the time of the suite's clock.
var base = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// farFuture is later than the creation time of every message the suite adds.
var farFuture = base.AddDate(100, 0, 0)

// stream is the stream the suite appends to.
const stream = "uowtest-1"

// errRollback makes a unit of work roll back.
var errRollback = errors.New("uowtest: decided against it")

// suite is a harness with the helpers the cases share.
type suite struct {
	Harness
	// claims counts the claims made so far; each claims later than the
	// leases of the one before end, so it sees every message stored.
	claims int
}

// runner returns a runner whose clock always reads base.
func (s *suite) runner() uow.Runner {
	return s.Runner(func() time.Time { return base })
}

// written is what one unit of work of the suite writes.
type written struct {
	msg   outbox.Message
	event eventstore.Event
}

// write adds one message and appends one event to stream in tx.
func (s *suite) write(ctx context.Context, t *testing.T, tx uow.Tx) (written, error) {
	t.Helper()
	w := written{msg: newMessage(t, tx.Now()), event: newEvent(t)}
	if err := s.Outbox.Add(ctx, tx, w.msg); err != nil {
		return w, err
	}
	if _, err := s.Events.Append(ctx, tx, stream, eventstore.Any, w.event); err != nil {
		return w, err
	}
	return w, nil
}

// commitOne writes in one unit of work that commits.
func (s *suite) commitOne(t *testing.T) written {
	t.Helper()
	var w written
	err := s.runner().Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var err error
		w, err = s.write(ctx, t, tx)
		return err
	})
	if err != nil {
		t.Fatalf("a unit of work that writes and returns nil: %v", err)
	}
	return w
}

// rollBack writes in one unit of work whose function then returns fnErr,
// and returns the unit of work's Tx and the error of Do.
func (s *suite) rollBack(t *testing.T, fnErr error) (uow.Tx, error) {
	t.Helper()
	var used uow.Tx
	err := s.runner().Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		used = tx
		if _, err := s.write(ctx, t, tx); err != nil {
			return err
		}
		return fnErr
	})
	return used, err
}

// rollBackOne writes in one unit of work that rolls back, and returns its
// Tx.
func (s *suite) rollBackOne(t *testing.T) uow.Tx {
	t.Helper()
	tx, err := s.rollBack(t, errRollback)
	if err != errRollback {
		t.Fatalf("Do returned %v, want %v", err, errRollback)
	}
	return tx
}

// wantStored checks that the outbox holds exactly the messages, in any
// order, and the stream exactly the events, in order, that ws wrote.
func (s *suite) wantStored(t *testing.T, why string, ws ...written) {
	t.Helper()
	var wantMsgs, wantEvents []uuid.UUID
	for _, w := range ws {
		wantMsgs = append(wantMsgs, w.msg.ID)
		wantEvents = append(wantEvents, w.event.ID)
	}
	slices.SortFunc(wantMsgs, compareIDs)
	if got := s.messages(t); !slices.Equal(got, wantMsgs) {
		t.Errorf("%s: the outbox holds messages %v, want %v", why, got, wantMsgs)
	}
	if got := s.events(t); !slices.Equal(got, wantEvents) {
		t.Errorf("%s: the stream holds events %v, want %v", why, got, wantEvents)
	}
}

// messages returns the IDs of every message in the outbox, sorted. It claims
// them far in the future, later than every earlier claim's lease ends.
func (s *suite) messages(t *testing.T) []uuid.UUID {
	t.Helper()
	s.claims++
	at := farFuture.Add(time.Duration(s.claims) * 24 * time.Hour)
	msgs, err := s.Outbox.Claim(t.Context(), at, time.Minute, 1000)
	if err != nil {
		t.Fatalf("Claim at %s: %v", at.Format(time.RFC3339), err)
	}
	ids := make([]uuid.UUID, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	slices.SortFunc(ids, compareIDs)
	return ids
}

func compareIDs(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }

// events returns the IDs of the events of stream, in version order, loaded
// in a unit of work of their own.
func (s *suite) events(t *testing.T) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	err := s.runner().Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var err error
		ids, err = s.eventsIn(ctx, tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// eventsIn returns the IDs of the events of stream, in version order, as
// tx sees them.
func (s *suite) eventsIn(ctx context.Context, tx uow.Tx) ([]uuid.UUID, error) {
	events, err := s.Events.Load(ctx, tx, stream, 1)
	if err != nil {
		return nil, fmt.Errorf("Load %s: %w", stream, err)
	}
	ids := make([]uuid.UUID, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	return ids, nil
}

func newMessage(t *testing.T, at time.Time) outbox.Message {
	t.Helper()
	m, err := outbox.NewMessage("mail", "hi", at)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newEvent(t *testing.T) eventstore.Event {
	t.Helper()
	e, err := eventstore.NewEvent("uowtest.happened", map[string]string{"what": "something"}, eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A unit of work whose function returns nil commits all it wrote; so do
// the units of work after it.
func testCommitsOnNil(t *testing.T, s *suite) {
	first := s.commitOne(t)
	s.wantStored(t, "after a committed unit of work", first)
	second := s.commitOne(t)
	s.wantStored(t, "after two committed units of work", first, second)
}

// A unit of work whose function returns an error writes nothing, and Do
// returns that very error, not a wrapper of it; the runner works after.
func testRollsBackOnError(t *testing.T, s *suite) {
	for _, fnErr := range []error{
		errRollback,
		fmt.Errorf("uowtest: wrapped by the function: %w", errRollback),
	} {
		_, err := s.rollBack(t, fnErr)
		if err != fnErr {
			t.Errorf("Do returned %v, want the function's error %v as it is", err, fnErr)
		}
		if !errors.Is(err, errRollback) {
			t.Errorf("Do returned %v, which is not %v", err, errRollback)
		}
	}
	s.wantStored(t, "after units of work that returned an error")
	w := s.commitOne(t)
	s.wantStored(t, "after a committed unit of work that followed them", w)
}

// panicValue is what the suite's units of work panic with; a pointer, so
// that the value recovered can be told apart from a copy.
type panicValue struct{ why string }

// unlessKept returns a context for units of work that need the
// connections earlier ones held: it ends after a while, so that a
// connection kept by an error or a panic makes them fail rather than wait
// for ever.
func unlessKept(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantPanicAgain calls unit, a call of the runner's method name whose
// function panics with want, and checks that it raises that panic again
// rather than return.
func wantPanicAgain(t *testing.T, name string, want *panicValue, unit func() error) {
	t.Helper()
	defer func() {
		if p := recover(); p != want {
			t.Errorf("recovered %#v from %s, want the function's panic %#v", p, name, want)
		}
	}()
	err := unit()
	t.Errorf("%s returned %v after its function panicked, want the panic raised again", name, err)
}

// A unit of work whose function panics writes nothing, and Do panics again
// with the same value; the runner works after, with its connection back.
func testRollsBackOnPanic(t *testing.T, s *suite) {
	want := &panicValue{why: "handler bug"}
	runner := s.runner()
	// Each unit of work after the first needs the connection that the one
	// before held.
	ctx := unlessKept(t)
	for range 2 {
		wantPanicAgain(t, "Do", want, func() error {
			return runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
				if _, err := s.write(ctx, t, tx); err != nil {
					return err
				}
				panic(want)
			})
		})
	}
	// The runner got its connection back: another unit of work commits.
	var w written
	err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		var err error
		w, err = s.write(ctx, t, tx)
		return err
	})
	if err != nil {
		t.Fatalf("the unit of work after the panics: %v", err)
	}
	s.wantStored(t, "after units of work that panicked and one that committed", w)
}

// Do reads the clock once when a unit of work begins; Now returns that
// reading in UTC, truncated to the microsecond, on every call, and the
// stores write it without reading a clock of their own.
func testOneClockReading(t *testing.T, s *suite) {
	oneClockReading(t, s, uow.Runner.Do, func(ctx context.Context, tx uow.Tx) error {
		if err := s.Outbox.Add(ctx, tx, newMessage(t, tx.Now())); err != nil {
			return err
		}
		appended, err := s.Events.Append(ctx, tx, stream, eventstore.Any, newEvent(t))
		if err != nil {
			return err
		}
		if len(appended) != 1 || !appended[0].RecordedAt.Equal(tx.Now()) {
			t.Errorf("appended %+v, want one event recorded at %v", appended, tx.Now())
		}
		return nil
	})
}

// Read reads the clock once when a unit of work begins, as Do does.
func testReadOneClockReading(t *testing.T, s *suite) {
	oneClockReading(t, s, uow.Runner.Read, func(ctx context.Context, tx uow.Tx) error {
		_, err := s.eventsIn(ctx, tx)
		return err
	})
}

// unitFunc is [uow.Runner.Do] or [uow.Runner.Read].
type unitFunc func(r uow.Runner, ctx context.Context, fn func(ctx context.Context, tx uow.Tx) error) error

// oneClockReading runs two units of work with unit, each calling use,
// under a clock whose readings differ below the microsecond and are not
// in UTC, and checks that each unit of work read it once and that Now
// returns that reading in UTC, to the microsecond, before and after use.
func oneClockReading(t *testing.T, s *suite, unit unitFunc, use func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	cet := time.FixedZone("CET", 3600)
	readings := []time.Time{
		time.Date(2030, 1, 2, 3, 4, 5, 6789, cet),
		time.Date(2030, 1, 2, 3, 4, 5, 7999, cet),
	}
	wants := []time.Time{
		time.Date(2030, 1, 2, 2, 4, 5, 6000, time.UTC),
		time.Date(2030, 1, 2, 2, 4, 5, 7000, time.UTC),
	}
	var reads atomic.Int64
	runner := s.Runner(func() time.Time {
		n := reads.Add(1)
		return readings[min(int(n), len(readings))-1]
	})
	for i, want := range wants {
		err := unit(runner, t.Context(), func(ctx context.Context, tx uow.Tx) error {
			first := tx.Now()
			if first != want || first.Location() != time.UTC {
				t.Errorf("unit of work %d: Now = %v, want %v: the clock's reading in UTC, to the microsecond", i+1, first, want)
			}
			if err := use(ctx, tx); err != nil {
				return err
			}
			if again := tx.Now(); again != first {
				t.Errorf("unit of work %d: Now changed from %v to %v within it", i+1, first, again)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := reads.Load(); n != int64(i+1) {
			t.Errorf("after %d units of work the clock was read %d times, want once each", i+1, n)
		}
	}
}

// fakeTx is a [uow.Tx] that no backend made.
type fakeTx struct{}

func (fakeTx) Now() time.Time { return base }

// The stores refuse a Tx that is not their backend's, and nil, with
// ErrForeignTx.
func testRefuseForeignTx(t *testing.T, s *suite) {
	for _, tx := range []uow.Tx{fakeTx{}, &fakeTx{}, nil} {
		ctx := t.Context()
		if err := s.Outbox.Add(ctx, tx, newMessage(t, base)); !errors.Is(err, uow.ErrForeignTx) {
			t.Errorf("Outbox.Add with a %T: %v, want ErrForeignTx", tx, err)
		}
		if _, err := s.Events.Append(ctx, tx, stream, eventstore.Any, newEvent(t)); !errors.Is(err, uow.ErrForeignTx) {
			t.Errorf("Events.Append with a %T: %v, want ErrForeignTx", tx, err)
		}
		if _, err := s.Events.Load(ctx, tx, stream, 1); !errors.Is(err, uow.ErrForeignTx) {
			t.Errorf("Events.Load with a %T: %v, want ErrForeignTx", tx, err)
		}
	}
	s.wantStored(t, "after writes with foreign transactions")
}

// A Tx kept after its unit of work committed is an error for every store,
// and writes nothing.
func testUnusableAfterCommit(t *testing.T, s *suite) {
	var stale uow.Tx
	var w written
	err := s.runner().Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		stale = tx
		var err error
		w, err = s.write(ctx, t, tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.useStale(t, stale)
	s.wantStored(t, "after writes with the transaction of a committed unit of work", w)
}

// A Tx kept after its unit of work rolled back is an error for every store,
// and writes nothing.
func testUnusableAfterRollback(t *testing.T, s *suite) {
	stale := s.rollBackOne(t)
	s.useStale(t, stale)
	s.wantStored(t, "after writes with the transaction of a rolled-back unit of work")
}

// useStale checks that each store returns an error for tx, whose unit of
// work has ended.
func (s *suite) useStale(t *testing.T, tx uow.Tx) {
	t.Helper()
	ctx := t.Context()
	if err := s.Outbox.Add(ctx, tx, newMessage(t, base)); err == nil {
		t.Error("Outbox.Add with the Tx of an ended unit of work succeeded, want an error")
	} else {
		t.Logf("Outbox.Add with the Tx of an ended unit of work: %v", err)
	}
	if _, err := s.Events.Append(ctx, tx, stream, eventstore.Any, newEvent(t)); err == nil {
		t.Error("Events.Append with the Tx of an ended unit of work succeeded, want an error")
	} else {
		t.Logf("Events.Append with the Tx of an ended unit of work: %v", err)
	}
	if _, err := s.Events.Load(ctx, tx, stream, 1); err == nil {
		t.Error("Events.Load with the Tx of an ended unit of work succeeded, want an error")
	} else {
		t.Logf("Events.Load with the Tx of an ended unit of work: %v", err)
	}
}

// read runs fn in a read-only unit of work and fails t on an error.
func (s *suite) read(t *testing.T, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	if err := s.runner().Read(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// wantEventsIn checks that tx sees exactly the events that ws wrote.
func (s *suite) wantEventsIn(ctx context.Context, t *testing.T, tx uow.Tx, why string, ws ...written) error {
	t.Helper()
	got, err := s.eventsIn(ctx, tx)
	if err != nil {
		return err
	}
	want := make([]uuid.UUID, len(ws))
	for i, w := range ws {
		want[i] = w.event.ID
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: a read-only unit of work sees events %v, want %v", why, got, want)
	}
	return nil
}

// A read-only unit of work sees what was committed before it began and
// none of what was rolled back. What commits while it is open, after its
// first read, it does not see, on every later read; the next one does.
func testReadSnapshot(t *testing.T, s *suite) {
	first := s.commitOne(t)
	s.rollBackOne(t)
	var second written
	s.read(t, func(ctx context.Context, tx uow.Tx) error {
		if err := s.wantEventsIn(ctx, t, tx, "after one commit and one rollback", first); err != nil {
			return err
		}
		second = s.commitOne(t)
		return s.wantEventsIn(ctx, t, tx, "after another unit of work committed while it was open", first)
	})
	s.read(t, func(ctx context.Context, tx uow.Tx) error {
		return s.wantEventsIn(ctx, t, tx, "after two commits", first, second)
	})
}

// A write through the Tx of a read-only unit of work fails with an error
// wrapping ErrReadOnly, which Read returns as it is; so does Lock, which
// only writers take. Nothing is written, even by a unit of work that goes
// on after the refusals and returns nil.
func testReadRefusesWrites(t *testing.T, s *suite) {
	w := s.commitOne(t)
	for _, write := range []struct {
		name string
		fn   func(ctx context.Context, tx uow.Tx) error
	}{
		{"Outbox.Add", func(ctx context.Context, tx uow.Tx) error {
			return s.Outbox.Add(ctx, tx, newMessage(t, tx.Now()))
		}},
		{"Events.Append", func(ctx context.Context, tx uow.Tx) error {
			_, err := s.Events.Append(ctx, tx, stream, eventstore.Any, newEvent(t))
			return err
		}},
		{"Events.Lock", func(ctx context.Context, tx uow.Tx) error {
			return s.Events.Lock(ctx, tx, stream)
		}},
	} {
		var writeErr error
		err := s.runner().Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			writeErr = write.fn(ctx, tx)
			return writeErr
		})
		if !errors.Is(writeErr, uow.ErrReadOnly) {
			t.Errorf("%s in a read-only unit of work: %v, want an error wrapping ErrReadOnly", write.name, writeErr)
		} else {
			t.Logf("%s in a read-only unit of work: %v", write.name, writeErr)
		}
		if err != writeErr {
			t.Errorf("Read returned %v, want the function's error %v as it is", err, writeErr)
		}
	}
	err := s.runner().Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		_, err := s.write(ctx, t, tx)
		if !errors.Is(err, uow.ErrReadOnly) {
			t.Errorf("a write in a read-only unit of work: %v, want an error wrapping ErrReadOnly", err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("Read whose function ignored a refused write: %v", err)
	}
	s.wantStored(t, "after writes in read-only units of work", w)
}

// Read returns the error of its function as it is and raises its panic
// again; either way the runner works after, with its connections back.
func testReadErrorsAndPanics(t *testing.T, s *suite) {
	want := &panicValue{why: "query bug"}
	runner := s.runner()
	// More units of work than a read pool holds connections.
	ctx := unlessKept(t)
	for range 8 {
		err := runner.Read(ctx, func(ctx context.Context, tx uow.Tx) error {
			if _, err := s.eventsIn(ctx, tx); err != nil {
				return err
			}
			return errRollback
		})
		if err != errRollback {
			t.Fatalf("Read returned %v, want the function's error %v as it is", err, errRollback)
		}
		wantPanicAgain(t, "Read", want, func() error {
			return runner.Read(ctx, func(ctx context.Context, tx uow.Tx) error {
				if _, err := s.eventsIn(ctx, tx); err != nil {
					return err
				}
				panic(want)
			})
		})
	}
	w := s.commitOne(t)
	err := runner.Read(ctx, func(ctx context.Context, tx uow.Tx) error {
		return s.wantEventsIn(ctx, t, tx, "after the errors and panics", w)
	})
	if err != nil {
		t.Fatalf("the read-only unit of work after the errors and panics: %v", err)
	}
}

// A Tx kept after its read-only unit of work ended is an error for every
// store, and writes nothing.
func testReadTxUnusableAfterward(t *testing.T, s *suite) {
	var stale uow.Tx
	s.read(t, func(ctx context.Context, tx uow.Tx) error {
		stale = tx
		_, err := s.eventsIn(ctx, tx)
		return err
	})
	s.useStale(t, stale)
	s.wantStored(t, "after writes with the transaction of an ended read-only unit of work")
}
