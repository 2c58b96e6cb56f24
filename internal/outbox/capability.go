package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// ErrNotFound is returned by [Store.Retry] and [Store.Bury] for a message the
// store does not hold, for example one that another relay has acknowledged.
// [Store.Ack] of such a message succeeds: the message is gone either way.
var ErrNotFound = errors.New("outbox: message not found")

// The interfaces below are optional capabilities. A [Relay] uses one when its
// store implements it and does without it otherwise, as Watermill does with
// optional interfaces of its publishers and subscribers.

// BatchAcker is implemented by stores that can remove many delivered
// messages in one call. The relay acknowledges a batch through it, which is
// what lets one database round trip settle a whole claim.
type BatchAcker interface {
	// AckAll removes the delivered messages with the given IDs. IDs the store
	// does not hold are skipped, as [Store.Ack] does.
	AckAll(ctx context.Context, ids []uuid.UUID) error
}

// Waker is implemented by stores that can tell a relay when messages may have
// become due, so that delivery need not wait for the next poll.
type Waker interface {
	// Wakeups returns a channel that receives a value soon after a
	// transaction that added messages commits. Wake-ups may coalesce and may
	// be spurious; the channel is closed when ctx is done.
	Wakeups(ctx context.Context) <-chan struct{}
}

// Inspector is implemented by stores that can describe their backlog to
// metrics and operators.
type Inspector interface {
	// OldestDue returns the due time of the message that has been due the
	// longest at now, and false when no message is due.
	OldestDue(ctx context.Context, now time.Time) (time.Time, bool, error)
	// Buried returns up to limit buried messages, oldest burial first.
	Buried(ctx context.Context, limit int) ([]Record, error)
	// Lookup returns the message with id as the store holds it, or an error
	// wrapping [ErrNotFound].
	Lookup(ctx context.Context, id uuid.UUID) (Record, error)
}

// Requeuer is implemented by stores that can give buried messages another
// chance, for an operator who has mended what buried them.
type Requeuer interface {
	// Requeue makes a buried message due at at, with its attempts counted
	// from zero again and its last error kept. It returns an error wrapping
	// [ErrNotFound] for a message that is not buried.
	Requeue(ctx context.Context, id uuid.UUID, at time.Time) error
}

// Record is a stored message with its delivery state.
type Record struct {
	Message
	// DueAt is when the message may next be claimed: its creation, its
	// retry time, or the end of its lease.
	DueAt time.Time
	// LastError is the reason given by the last Retry or Bury, if any.
	LastError string
	// BuriedAt is when the message was buried; zero while it is not.
	BuriedAt time.Time
}
