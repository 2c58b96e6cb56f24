package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is returned by [Store.Retry] and [Store.Bury] for a message the
// store does not hold, for example one that another relay has acknowledged.
// [Store.Ack] of such a message succeeds: the message is gone either way.
var ErrNotFound = errors.New("outbox: message not found")

// The interfaces below are optional capabilities. A [Relay] uses one when its
// store implements it and does without it otherwise, as Watermill does with
// optional interfaces of its publishers and subscribers. A test of the relay
// hides each of them to run its fallback.

// BatchAcker is implemented by stores that can remove many delivered
// messages in one call. The relay acknowledges what its deliveries finished
// meanwhile through it, in one database round trip; without it, it calls
// [Store.Ack] once per message.
type BatchAcker interface {
	// AckAll removes the delivered messages, each only while its lease is
	// its latest claim, as [Store.Ack] does under [WithLease]. Messages the
	// store does not hold, or holds under another claim, are skipped.
	AckAll(ctx context.Context, leases []Lease) error
}

// Waker is implemented by stores that can tell a relay when messages may have
// become due, so that delivery need not wait for the next poll. Without it,
// the relay finds new messages at its next poll.
type Waker interface {
	// Wakeups returns a channel that receives a value soon after a
	// transaction that added messages commits. Wake-ups may coalesce and may
	// be spurious; the channel is closed when ctx is done.
	Wakeups(ctx context.Context) <-chan struct{}
}

// Listener is implemented by [Waker] stores whose wake-ups can miss the
// commits of other processes, for the relay's outbox.wakeups.listening
// gauge, so that a relay that only polls for them is seen.
type Listener interface {
	// Listening reports whether the commits of other processes wake the
	// relay soon after they happen; false when it finds them only at its
	// next poll.
	Listening() bool
}

// BacklogReader is implemented by stores that can count what they hold, for
// the relay's gauges. Without it, the relay reports no backlog.
type BacklogReader interface {
	// Backlog counts the messages due at now and the buried ones, and finds
	// the due time of the one that has been due the longest.
	Backlog(ctx context.Context, now time.Time) (Backlog, error)
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

// Record is a stored message with its delivery state, as the operators'
// commands of the backends show it.
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

// The states of a message as operators see them.
const (
	// StateDue is a message that may be claimed now.
	StateDue = "due"
	// StateWaiting is a message leased by a relay or waiting for its
	// retry time.
	StateWaiting = "waiting"
	// StateBuried is a message the relay stopped delivering.
	StateBuried = "buried"
)

// State returns the state of r at now.
func (r Record) State(now time.Time) string {
	switch {
	case !r.BuriedAt.IsZero():
		return StateBuried
	case r.DueAt.After(now):
		return StateWaiting
	default:
		return StateDue
	}
}

// ListFilter says which messages an operator lists.
type ListFilter struct {
	// State, when not empty, is the only state listed: [StateDue],
	// [StateWaiting] or [StateBuried], judged at Now.
	State string
	// Topic, when not empty, is the only topic listed.
	Topic string
	// Now is the time the states are judged at.
	Now time.Time
	// Limit bounds how many are listed.
	Limit int
}

// ErrNotBuried is returned by the backends' Discard for a message that is
// not buried: a message still to deliver is never thrown away.
var ErrNotBuried = errors.New("outbox: message is not buried")

// CheckFields returns an error unless each of fields is a top-level JSON
// key of ASCII letters, digits and underscores, the keys the backends'
// RedactBuried removes.
func CheckFields(fields []string) error {
	if len(fields) == 0 {
		return errors.New("no fields to redact")
	}
	for _, f := range fields {
		if f == "" {
			return errors.New("an empty field name")
		}
		for _, c := range f {
			if !(c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				return fmt.Errorf("field %q is not a plain key", f)
			}
		}
	}
	return nil
}
