package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/uow"
)

// Store keeps messages until they are delivered.
//
// A context can narrow Claim by a [Scope], and fence Ack, Retry and
// Bury by the [Lease] of the claim that settles them; every store honours
// both, as those types describe.
type Store interface {
	// Add stores messages as part of tx. Each becomes due at its CreatedAt.
	// A [RelayStore] keeps the [Origin] of ctx beside each of them.
	Add(ctx context.Context, tx uow.Tx, msgs ...Message) error
	// Claim leases up to limit due messages, earliest due first, until now+lease,
	// and increments their attempts. A due message is one that isn't buried,
	// whose retry time has passed and whose lease, if any, has ended, so a
	// message claimed by a relay that crashed is claimed again. Concurrent
	// claims never return the same message.
	Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Message, error)
	// Ack removes a delivered message.
	Ack(ctx context.Context, id uuid.UUID) error
	// Retry ends a message's lease and makes it due again at at, keeping
	// reason as its last error.
	Retry(ctx context.Context, id uuid.UUID, at time.Time, reason string) error
	// Bury stops delivering a message and keeps it, with reason, for an
	// operator to inspect.
	Bury(ctx context.Context, id uuid.UUID, reason string) error
}

// ErrNotFound is returned by [Store.Retry] and [Store.Bury] for a message the
// store does not hold, for example one that another relay has acknowledged.
// [Store.Ack] of such a message succeeds: the message is gone either way.
var ErrNotFound = errors.New("outbox: message not found")

// RelayStore is the store a relay delivers from: a [Store] that also
// acknowledges in batches, wakes the relay when messages are committed, and
// counts what it holds. Both backends implement it.
type RelayStore interface {
	Store
	// ClaimWithOrigins claims as [Store.Claim] does, and returns each
	// message with the [Origin] that ctx gave it when it was added (the
	// zero Origin for a message added before stores kept one). Claim
	// returns the messages of the same claim, without their origins.
	ClaimWithOrigins(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Claimed, error)
	// AckAll removes the delivered messages, each only while its lease is
	// its latest claim, as [Store.Ack] does under [WithLease]. Messages the
	// store does not hold, or holds under another claim, are skipped. The
	// relay acknowledges what its deliveries finished meanwhile through
	// it, in one round trip.
	AckAll(ctx context.Context, leases []Lease) error
	// Wakeups returns a channel that receives a value soon after a
	// transaction that added messages commits, so that delivery need not
	// wait for the next poll. Wake-ups may coalesce and may be spurious;
	// the channel is closed when ctx is done.
	Wakeups(ctx context.Context) <-chan struct{}
	// Handover returns the store's [Handover], through which a running
	// relay takes the messages that Add stores in this process.
	Handover() *Handover
	// Backlog counts the messages due at now and the buried ones, and finds
	// the due time of the one that has been due the longest, for the
	// relay's gauges.
	Backlog(ctx context.Context, now time.Time) (Backlog, error)
}

// Listener is implemented by a [RelayStore] whose wake-ups can miss the
// commits of other processes (PostgreSQL's, which hears them through
// LISTEN only where its connection allows it; SQLite's wake-ups come from
// its own process and miss nothing). The relay reports it in its
// outbox.wakeups.listening gauge, so that a relay that only polls for
// them is seen.
type Listener interface {
	// Listening reports whether the commits of other processes wake the
	// relay soon after they happen; false when it finds them only at its
	// next poll.
	Listening() bool
}

// Backlog is what a store holds at one time.
type Backlog struct {
	// Due counts the messages that are not buried and may be claimed now.
	Due int64
	// Buried counts the buried messages.
	Buried int64
	// OldestDue is the due time of the message that has been due the
	// longest; zero when none is due.
	OldestDue time.Time
}
