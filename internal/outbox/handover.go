package outbox

import (
	"sync"
	"time"
)

// Handover passes the messages that the units of work of a process add to
// a relay of the same process that delivers from the same store, leased to
// it from the moment they are stored, so that they reach their handlers
// without being claimed: the delivery waits for no claim, and the database
// has one write less per message. Each store has one
// ([RelayStore.Handover]); a running relay takes messages through it
// ([Taker]).
//
// A store's Add asks [Handover.Take] which of its messages a relay takes,
// and stores those as a claim leaves a message: its first attempt counted,
// due again when the lease ends; the others it stores due at once. Once the
// unit of work has ended, the store calls [Taken.Committed] or
// [Taken.RolledBack], and only after a commit does the relay hand the
// messages to their handlers: a message is delivered only for a change
// that was committed.
//
// A relay takes a message only when it would deliver it at once if it
// claimed it: the message has no [Message.Key] (a keyed message waits for
// those of its key added before it, which only the store knows of), its
// topic has a handler and a closed breaker, and the relay holds more than
// a batch's worth of slots free and is not draining a backlog, so that
// what is already due goes first and keeps the slots its claims need. What
// it leaves is claimed as usual.
//
// The lease runs from the Add, so a unit of work that commits late
// shortens its handlers' time, as a slow claim does: they get
// [RelayConfig.Timeout], or what the lease leaves once [SettleTimeout] is
// kept for recording their outcome. A message whose lease leaves nothing,
// or whose relay has stopped by the commit, is released, due again at
// once with its attempt given back, and the store wakes the relays for it
// as for a message not taken. One whose process dies between the commit
// and the delivery is due again when its lease ends, as a claimed one is.
type Handover struct {
	mu     sync.Mutex
	takers []Taker
}

// Taker is a relay that takes messages through a [Handover]: the relay of
// package relay, while it runs.
type Taker interface {
	// Take returns what the relay takes of msgs, the messages of one Add,
	// which carry origin, or nil when it takes none.
	Take(origin Origin, msgs []Message) *Taken
	// Committed hands the messages of t to their handlers, once the unit
	// of work that added them has committed, and reports whether it did;
	// false when it released them instead. It never waits for a delivery;
	// it waits for the store when it releases them.
	Committed(t *Taken) bool
	// RolledBack gives back the relay's slots of t, once the unit of work
	// that added the messages has rolled back or failed to commit.
	RolledBack(t *Taken)
}

// Attach makes h offer the messages of Take to t until the returned
// function is called. A nil h offers none.
func (h *Handover) Attach(t Taker) (detach func()) {
	if h == nil {
		return func() {}
	}
	h.mu.Lock()
	h.takers = append(h.takers, t)
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i, x := range h.takers {
			if x == t {
				h.takers = append(h.takers[:i], h.takers[i+1:]...)
				return
			}
		}
	}
}

// Take returns what a relay of this process takes of msgs, the messages of
// one Add, which carry origin. A nil h, or one on which no relay runs,
// takes none, and returns nil, on which every method of [Taken] works.
func (h *Handover) Take(origin Origin, msgs []Message) *Taken {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.takers {
		if taken := t.Take(origin, msgs); taken != nil {
			return taken
		}
	}
	return nil
}

// Taken is what a relay took of the messages of one Add. The [Taker]
// fills it in; the store reads it to store the messages, and reports the
// end of their unit of work through it.
type Taken struct {
	// By is the relay that took the messages.
	By Taker
	// Claimed are the messages taken, in the order of the Add, as a claim
	// until Until would return them: their first attempt counted.
	Claimed []Claimed
	// Until is when their lease ends.
	Until time.Time
	// Took says of each message of the Add whether it is among Claimed.
	Took []bool
}

// Due returns when m, the i-th message of the Add, is to be stored due,
// and with how many attempts: at its creation with none, or, when a relay
// took it, as its claim would leave it, due when the lease ends with its
// first attempt counted.
func (t *Taken) Due(i int, m Message) (time.Time, int) {
	if t == nil || !t.Took[i] {
		return m.CreatedAt, 0
	}
	return t.Until, 1
}

// Len returns how many messages of the Add were taken.
func (t *Taken) Len() int {
	if t == nil {
		return 0
	}
	return len(t.Claimed)
}

// Committed hands the messages taken to their relay, once the unit of work
// that added them has committed, and reports whether it did; false when
// it released them instead, or took none. It never waits for a delivery;
// it waits for the store when it releases them.
func (t *Taken) Committed() bool {
	if t == nil {
		return false
	}
	return t.By.Committed(t)
}

// RolledBack gives the relay its slots back, once the unit of work that
// added the messages has rolled back or failed to commit. Should a commit
// that reported a failure have taken effect after all, its messages are
// due again when their lease ends.
func (t *Taken) RolledBack() {
	if t == nil {
		return
	}
	t.By.RolledBack(t)
}
