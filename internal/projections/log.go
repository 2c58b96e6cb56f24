package projections

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// Topic is the one topic of a [Log]: the event log of the backend.
const Topic = "events"

// Log is a backend's event log as an asynchronous projection follows it,
// through a watermill-sql subscriber.
//
// The subscriber delivers the events of the log in the order of
// [eventstore.Store.ReadAll], each once per consumer group, and never passes
// over an event whose transaction could still commit. It reads a window of
// the log in one database transaction and hands the window's events of the
// group's types to the router as one message ([BatchMessage]) in that
// transaction's context; [Log.Apply] applies them and moves the group's
// offset to the window's end in the same transaction, so the writes a
// handler makes commit exactly when the offset that covers their events
// does. Two subscribers of one group take turns on the group's offset, so
// an event is never applied by both.
type Log interface {
	// Subscriber returns a subscriber of [Topic] for the consumer group
	// that delivers only events of the given types (all, when types is
	// empty).
	Subscriber(group string, types []string, logger watermill.LoggerAdapter) (message.Subscriber, error)
	// Apply hands the events of msg's batch to apply, in the subscriber's
	// transaction that msg's context carries, inside a savepoint, and moves
	// the group's offset to the batch's end in that savepoint too
	// ([Batches]). apply's writes commit exactly when an offset that covers
	// their events does, and a failed apply leaves no write behind, even
	// though the subscriber goes on with the same transaction (it does not
	// roll back on a Nack, but sends the message again); the error of an
	// event that cannot be applied is an [*EventError]. Only Apply moves the
	// offset: a batch the subscriber commits without it (it stopped waiting
	// for the handler) is delivered again. apply is not called for a batch
	// of no event. The unit of work's time is now.
	Apply(msg *message.Message, now time.Time, apply func(ctx context.Context, tx uow.Tx, events []eventstore.Event) error) error
	// Behind counts the events of the given types (all, when empty) that
	// group has still to apply, and returns when the oldest of them was
	// recorded: zero when none is left. The count is honest even when the
	// log's order is broken, as a logical copy of a database into another
	// server can break it: events the group's subscribers will never
	// reach in order (they sort before its offset but came after it, or
	// lie where no reader gets) are counted, and the error, which then
	// comes with the count and the time, wraps [ErrLogOrder].
	Behind(ctx context.Context, group string, types []string) (int64, time.Time, error)
	// Fail records, outside any subscriber's transaction, that group has
	// stopped at f.Position; the group's next applied event clears it.
	Fail(ctx context.Context, group string, f Failure) error
	// Failure returns the failure recorded for group, and false when it
	// has none.
	Failure(ctx context.Context, group string) (Failure, bool, error)
	// Versions returns the registry's versions of the projection name;
	// one the registry does not hold yet serves base.
	Versions(ctx context.Context, name string, base int) (Versions, error)
	// Catalog runs fn in a transaction of its own, outside any
	// subscriber's, that holds the registry's entry of name (made at base
	// when missing) until it commits, and stores the versions fn returns.
	// Two calls for one name take turns.
	Catalog(ctx context.Context, name string, base int, fn func(ctx context.Context, tx uow.Tx, v Versions) (Versions, error)) error
	// Forget removes group's offset, and its failure, as part of tx, a
	// transaction of Catalog, so that the group starts again at the log's
	// start when it next subscribes; it waits for a batch of the group in
	// flight to commit.
	Forget(ctx context.Context, tx uow.Tx, group string) error
	// Retire marks group's offset retired as part of tx, a transaction of
	// Catalog, waiting for a batch of the group in flight to commit: no
	// batch of the group reads anything afterwards, even one of a
	// subscriber that subscribes again, and Behind counts none for it.
	Retire(ctx context.Context, tx uow.Tx, group string) error
}

// ErrLogOrder is wrapped by the error of [Log.Behind] when the log holds
// events a group will never apply in order: its order was broken, as a
// logical copy of the database into another server that was not set
// right breaks it. Behind still counts them.
var ErrLogOrder = errors.New("projections: the event log is out of order")

// Failure is why a projection stopped.
type Failure struct {
	// At is when it stopped.
	At time.Time
	// Position is the event it could not apply.
	Position eventstore.Position
	// Error is what applying it said.
	Error string
}

// FormatPosition returns p as the text a backend keeps of a failure's
// position; [ParsePosition] reads it back.
func FormatPosition(p eventstore.Position) string {
	return strconv.FormatUint(p.Commit, 10) + "." + strconv.FormatInt(p.Seq, 10)
}

// ParsePosition reads a position of [FormatPosition].
func ParsePosition(s string) (eventstore.Position, error) {
	c, q, ok := strings.Cut(s, ".")
	commit, err1 := strconv.ParseUint(c, 10, 64)
	seq, err2 := strconv.ParseInt(q, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return eventstore.Position{}, fmt.Errorf("projections: position %q", s)
	}
	return eventstore.Position{Commit: commit, Seq: seq}, nil
}

// LogConfig tunes the subscribers of a [Log]. A zero field takes its
// default: the backend's own for AckDeadline and BatchSize, the one given
// below for the others.
type LogConfig struct {
	// PollInterval is how long a subscriber that found no event waits for
	// a wake-up before it reads the log again; default 1s.
	PollInterval time.Duration
	// ResendInterval is how long a subscriber waits before it hands a
	// failed event over again; default 1s.
	ResendInterval time.Duration
	// RetryInterval is how long a subscriber waits after an error of the
	// database; default 1s.
	RetryInterval time.Duration
	// AckDeadline bounds how long a subscriber waits for its handler to
	// settle one event. An event not settled in time is delivered again
	// with the next batch, and the events before it commit.
	AckDeadline time.Duration
	// BatchSize is how many events a subscriber reads, and applies, in one
	// transaction.
	BatchSize int
}

// WithDefaults returns c with each zero field set to its default, and
// AckDeadline and BatchSize to the backend's.
func (c LogConfig) WithDefaults(ackDeadline time.Duration, batchSize int) LogConfig {
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.ResendInterval == 0 {
		c.ResendInterval = time.Second
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = time.Second
	}
	if c.AckDeadline == 0 {
		c.AckDeadline = ackDeadline
	}
	if c.BatchSize == 0 {
		c.BatchSize = batchSize
	}
	return c
}

// Validate reports a field that is negative.
func (c LogConfig) Validate() error {
	switch {
	case c.PollInterval < 0, c.ResendInterval < 0, c.RetryInterval < 0, c.AckDeadline < 0:
		return fmt.Errorf("projections: log config: intervals must not be negative: %+v", c)
	case c.BatchSize < 0:
		return fmt.Errorf("projections: log config: batch size must not be negative, got %d", c.BatchSize)
	}
	return nil
}

// MetadataGroup is the metadata key of the consumer group a [Log]'s
// message was read for.
const MetadataGroup = "consumer_group"
