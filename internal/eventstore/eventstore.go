package eventstore

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/uow"
)

// ErrConcurrency is returned by [Store.Append] and [Store.AppendLater] when
// the stream is not at the expected version, including when a concurrent
// transaction appended to it first, and by [Store.AppendLaterIf] when its
// condition does not hold. Retry the unit of work on the stream's
// new state.
var ErrConcurrency = errors.New("eventstore: stream changed concurrently")

// ErrDuplicateEvent is returned by [Store.Append] and [Store.AppendLater]
// when an event's ID is already stored in another stream, or when only some
// of the appended events are already in the stream. Appending events that
// are all already in the stream is not an error for Append: it changes
// nothing.
var ErrDuplicateEvent = errors.New("eventstore: event already stored")

// ErrInvalidEvent is returned by [Store.Append] for an event that cannot be
// stored: no ID, no stream or type, or data that is not JSON.
var ErrInvalidEvent = errors.New("eventstore: invalid event")

// Expected is the version a stream must be at for an append to succeed. A
// positive value is an exact version.
type Expected int64

const (
	// Any appends whatever the stream's version.
	Any Expected = -1
	// NoStream appends only to a stream that has no events yet.
	NoStream Expected = 0
)

// Exactly returns the expectation that the stream is at version v; 0 means
// the stream has no events.
func Exactly(v int64) Expected { return Expected(v) }

// Metadata is what an event carries besides its data.
type Metadata struct {
	// CorrelationID ties together everything caused by one request.
	CorrelationID string `json:"correlation_id,omitempty"`
	// CausationID names the command or event that caused this event.
	CausationID string `json:"causation_id,omitempty"`
	// Extra holds any other key and value.
	Extra map[string]string `json:"extra,omitempty"`
}

// Event is one fact in a stream.
type Event struct {
	// ID identifies the event; appending an ID the stream has is a no-op.
	// NewEvent sets a UUIDv7.
	ID uuid.UUID
	// Stream names the aggregate the event belongs to.
	Stream string
	// Version is the event's place in its stream, from 1. Append sets it.
	Version int64
	// Type names the kind of event, such as "user.signed_in".
	Type string
	// Data is the event's JSON body.
	Data []byte
	// SchemaVersion is the version of Data's shape under Type, from 1; an
	// event appended with 0 is stored as version 1. Stores keep it as
	// given and read it back; a [Registry] sets it on the events it makes
	// and upcasts older versions to the current one on read.
	SchemaVersion int
	Metadata      Metadata
	// RecordedAt is the time of the unit of work that appended the event.
	// Append sets it from the transaction.
	RecordedAt time.Time
	// Position is the event's place in the log. Append leaves it zero;
	// Load, LoadSince, ReadAll and ReadCommitted set it.
	Position Position
}

// Position is a place in the log, in the order of [Store.ReadAll]. The zero Position lies
// before every event. Positions compare with [Position.Less]; their fields
// mean something only to the backend that made them.
type Position struct {
	// Commit orders the transactions that appended events.
	Commit uint64
	// Seq orders events within and across transactions.
	Seq int64
}

// Less reports whether p comes before q in the log.
func (p Position) Less(q Position) bool {
	if p.Commit != q.Commit {
		return p.Commit < q.Commit
	}
	return p.Seq < q.Seq
}

// Store keeps streams of events.
type Store interface {
	// Append adds events to the end of stream as part of tx, numbering them
	// from the stream's current version, and returns them with Version and
	// RecordedAt set. It returns [ErrConcurrency] when the stream is not at
	// expected, [ErrDuplicateEvent] or [ErrInvalidEvent] as those say, and
	// the stored events unchanged when all of them are already in the
	// stream. Appending no events does nothing and returns nothing, whatever
	// expected says. Errors leave tx usable but the caller should roll it
	// back. Under [Any] an append can still lose a race with a concurrent
	// one and return ErrConcurrency.
	Append(ctx context.Context, tx uow.Tx, stream string, expected Expected, events ...Event) ([]Event, error)
	// AppendLater is Append for a unit of work that is run again as a
	// whole when it returns ErrConcurrency. Under [NoStream] or [Exactly]
	// a backend may send the append with tx's next statement or its
	// commit, to save a round trip to the database: it then returns the
	// events numbered from expected at once, and a conflict fails
	// whichever later call of tx sends the append, of any store, or the
	// commit, and the whole unit of work with it: ErrConcurrency when the
	// stream is not at expected, ErrDuplicateEvent when an event's ID is
	// stored already, even where Append would return the stored events
	// (an ID that another unit of work is still appending may be
	// ErrConcurrency). The unit of work must therefore return, or wrap
	// with %w, the error of every call of tx after it. A statement that
	// fails because the stream is not at expected fails with an error
	// that names nothing of the stream or its events, since the
	// database's own log may keep it. Under [Any] it is Append.
	AppendLater(ctx context.Context, tx uow.Tx, stream string, expected Expected, events ...Event) ([]Event, error)
	// AppendLaterIf is AppendLater for a decision taken without loading
	// the stream, on the presumption that cond holds: it appends events
	// after the stream's head, whatever its version, only while the
	// stream's events meet cond ([Condition]). Otherwise, or when a
	// concurrent transaction appends to the stream first, the unit of
	// work fails with ErrConcurrency, from the call or a later one as
	// under AppendLater, and its caller may run it again, loading the
	// stream this time. It saves the load's round trip for decisions
	// that hold whenever cond does. An event whose ID is stored already,
	// in this stream or another, is ErrDuplicateEvent, whether or not
	// cond holds; an invalid event is ErrInvalidEvent, an invalid cond an
	// error; in a read-only unit of work it returns an error wrapping
	// [uow.ErrReadOnly]. Appending no events does nothing. The events it
	// returns have their RecordedAt set but no Version, which is known
	// only once the append is sent. Where cond holds and no concurrent
	// append wins, no statement fails, so the database logs no error.
	AppendLaterIf(ctx context.Context, tx uow.Tx, stream string, cond Condition, events ...Event) ([]Event, error)
	// Load returns the events of stream whose version is at least from, in
	// version order. A stream with no events returns none and no error.
	Load(ctx context.Context, tx uow.Tx, stream string, from int64) ([]Event, error)
	// LoadSince returns the recent stretch of stream: its events after
	// the last one whose [Event.RecordedAt] is before since (all of them
	// when none is), in version order, with their Position set as
	// [Store.Load] sets it, and the stream's current version: 0 for a
	// stream with no events, and the version of its last event even when
	// none is recent. Both are read together, in one snapshot of the
	// stream, so an append at [Exactly] that version is an optimistic check
	// on the whole stream, including the events left out. It is for
	// aggregates whose decisions depend only on their latest events but
	// whose streams grow without bound.
	//
	// RecordedAt is read from the clock of the unit of work that appended
	// an event, so it need not grow with the version. While it does, the
	// recent stretch is the events recorded at or after since. Where
	// clocks disagree, an event recorded at or after since is left out
	// when a later version carries an earlier time than since: what is
	// returned always runs without a gap to the head, so a fold never
	// sees a fact without the ones that came after it. A store finds the
	// stretch from the head back, without an index of times. since is compared exactly, though stores keep RecordedAt to
	// the microsecond: a since of 12:00:00.0000005 counts an event of
	// 12:00:00.000000 as before it.
	LoadSince(ctx context.Context, tx uow.Tx, stream string, since time.Time) ([]Event, int64, error)
	// Lock holds stream for tx until tx ends: another unit of work that locks
	// the same stream waits until then. Optimistic concurrency alone makes N
	// writers racing for one stream fail N-1 of them each round; locking the
	// stream before loading it queues them instead, for streams that are
	// that hot. Only writers queue: in a read-only unit of work
	// ([uow.Runner.Read]) Lock returns an error wrapping [uow.ErrReadOnly].
	Lock(ctx context.Context, tx uow.Tx, stream string) error
	// ReadAll returns up to limit events of every stream that come after
	// position in the log's order. It returns an event only once every
	// transaction that could still commit an earlier one has ended, so a
	// reader that resumes from the last position it saw never misses one.
	ReadAll(ctx context.Context, tx uow.Tx, after Position, limit int) ([]Event, error)
	// ReadCommitted returns up to limit events after position, in the order
	// of [Store.ReadAll], of every transaction committed when it runs. It
	// does not wait for transactions in flight, so a reader that resumes
	// from a position may miss an event that commits later behind it; it is
	// for readers that keep such commits out, as a rebuild that has locked
	// its projection does, and who must not wait on unrelated transactions.
	ReadCommitted(ctx context.Context, tx uow.Tx, after Position, limit int) ([]Event, error)
	// Truncate deletes the events of stream whose version is below before,
	// as part of tx, and returns how many it deleted; as KurrentDB's
	// truncate-before does, it keeps the stream's version: it never deletes
	// the stream's last event, so the next append still numbers from it
	// and an append at [Exactly] of the version still checks the whole
	// stream. It is for streams whose old events no decision needs and
	// that must not be kept, such as those that hold personal data past
	// its use. A deleted event is gone for every reader: [Store.Load] and
	// [Store.LoadSince] start after it, and a reader of the log that has
	// not passed it yet never sees it, so truncate only events that the
	// projections following the log do not need. The IDs of deleted events
	// are forgotten with them: appending one of them again appends it anew
	// rather than finding it stored. In a read-only unit of work it returns
	// an error wrapping [uow.ErrReadOnly].
	Truncate(ctx context.Context, tx uow.Tx, stream string, before int64) (int64, error)
}
