package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// ErrLeaseLost is returned by [Store.Retry] and [Store.Bury] under a
// [Lease] that is no longer the message's latest claim: the message was
// claimed again, settled, requeued or removed since.
var ErrLeaseLost = errors.New("outbox: lease lost")

// Lease is one claim of a message, as the relay that made it holds it: the
// attempt the claim counted and the time it ends. Both are what
// [Store.Claim] writes, so together they fence the claim: a later claim
// writes a higher attempt or another end, and a settlement (Retry, Bury,
// Ack, requeue) moves the due time away from the lease's end.
//
// A store settles a message under the lease that a context carries
// ([WithLease]) only while that lease is the message's latest claim:
// [Store.Ack] then removes it, [Store.Retry] and [Store.Bury] change it.
// Once the message has been claimed again, or settled, they change nothing
// of it, whatever the clock of the relay that calls them says: Ack
// succeeds, since the message is gone or another claim will settle it, and
// Retry and Bury return an error wrapping [ErrLeaseLost]. So a relay that
// was slow, or whose clock is off, can never cut short the lease of another
// relay, nor settle a delivery that another claim has taken over.
//
// Without a lease in the context, the store settles by ID alone, as an
// operator does.
type Lease struct {
	// ID is the claimed message's.
	ID uuid.UUID
	// Attempts is the message's attempt count after the claim, as
	// [Message.Attempts] of the claimed message says.
	Attempts int
	// Until is when the claim ends: the now given to Claim plus its lease.
	Until time.Time
	// Released marks a claim given back before its message reached a
	// handler. [Store.Retry] under it makes the message due at its at, and
	// gives back the attempt that the claim counted while keeping the last
	// error and ignoring the reason, so that a relay that stops or runs out
	// of lease before it gets to a message spends none of its attempts.
	Released bool
}

// LeaseOf returns the lease under which m was claimed at now for lease.
func LeaseOf(m Message, now time.Time, lease time.Duration) Lease {
	return Lease{ID: m.ID, Attempts: m.Attempts, Until: now.Add(lease)}
}

type leaseKey struct{}

// WithLease returns a context under which the store settles l.ID only while
// l is its latest claim, as [Lease] describes.
func WithLease(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// LeaseFrom returns the lease that ctx carries for the message id, and
// false when it carries none for that message. Stores call it in Ack,
// Retry and Bury.
func LeaseFrom(ctx context.Context, id uuid.UUID) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(Lease)
	if !ok || l.ID != id {
		return Lease{}, false
	}
	return l, true
}
