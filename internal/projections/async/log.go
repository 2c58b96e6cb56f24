package async

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
)

// Topic is the one topic of a [Log]: the event log of the backend.
const Topic = "events"

// Log is a backend's event log as an asynchronous projection follows it,
// through a watermill-sql subscriber: the [projections.Log], which keeps
// account of the consumer groups and the registry, and the subscriber and
// the Apply that feed a Watermill router.
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
	projections.Log
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
	// of no event. The unit of work's time is now. The backend's event
	// store loads streams in tx ([eventstore.Store.Load]), so that apply
	// can fold the stream of an event it is handed.
	Apply(msg *message.Message, now time.Time, apply func(ctx context.Context, tx uow.Tx, events []eventstore.Event) error) error
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
