package outbox

import (
	"context"
	"sync"
	"time"
)

// Handover passes the messages that the units of work of a process add to
// a relay of the same process that delivers from the same store, leased to
// it from the moment they are stored, so that they reach their handlers
// without being claimed: the delivery waits for no claim, and the database
// has one write less per message. Each store has one
// ([RelayStore.Handover]); [Relay.Run] takes messages through it while it
// runs.
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
// a batch's worth of slots free ([HeldBatches]) and is not draining a
// backlog, so that what is already due goes first and keeps the slots its
// claims need. What it leaves is claimed as usual.
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
	mu   sync.Mutex
	subs []*subscriber
}

// attach makes h offer the messages of Take to s until the returned
// function is called.
func (h *Handover) attach(s *subscriber) (detach func()) {
	if h == nil {
		return func() {}
	}
	h.mu.Lock()
	h.subs = append(h.subs, s)
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i, x := range h.subs {
			if x == s {
				h.subs = append(h.subs[:i], h.subs[i+1:]...)
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
	for _, s := range h.subs {
		if t := s.take(origin, msgs); t != nil {
			return t
		}
	}
	return nil
}

// Taken is what a relay took of the messages of one Add.
type Taken struct {
	sub *subscriber
	// claimed are the messages taken, in the order of the Add, as a claim
	// until until would return them; took says of each message of the Add
	// whether it is among them.
	claimed []Claimed
	until   time.Time
	took    []bool
}

// Due returns when m, the i-th message of the Add, is to be stored due,
// and with how many attempts: at its creation with none, or, when a relay
// took it, as its claim would leave it, due when the lease ends with its
// first attempt counted.
func (t *Taken) Due(i int, m Message) (time.Time, int) {
	if t == nil || !t.took[i] {
		return m.CreatedAt, 0
	}
	return t.until, 1
}

// Len returns how many messages of the Add were taken.
func (t *Taken) Len() int {
	if t == nil {
		return 0
	}
	return len(t.claimed)
}

// Committed hands the messages taken to their relay, once the unit of work
// that added them has committed, and reports whether it did; false when
// it released them instead, or took none. It never waits for a delivery;
// it waits for the store when it releases them.
func (t *Taken) Committed() bool {
	if t == nil {
		return false
	}
	return t.sub.deliverTaken(t)
}

// RolledBack gives the relay its slots back, once the unit of work that
// added the messages has rolled back or failed to commit. Should a commit
// that reported a failure have taken effect after all, its messages are
// due again when their lease ends.
func (t *Taken) RolledBack() {
	if t == nil {
		return
	}
	t.sub.r.sem.release(len(t.claimed))
}

// take takes what the relay may deliver at once of msgs, or returns nil.
func (s *subscriber) take(origin Origin, msgs []Message) *Taken {
	r := s.r
	if s.backlog.Load() {
		return nil
	}
	until := r.now().Add(r.cfg.Lease)
	var t *Taken
	for i, m := range msgs {
		if m.Key != "" || r.handlers[m.Topic] == nil || !r.breakers.isClosed(m.Topic) {
			continue
		}
		if !r.sem.tryAcquireLeaving(1, r.cfg.Batch) {
			break
		}
		if t == nil {
			t = &Taken{sub: s, until: until, took: make([]bool, len(msgs))}
		}
		m.Attempts = 1
		t.took[i] = true
		t.claimed = append(t.claimed, Claimed{Message: m, Origin: origin})
	}
	return t
}

// deliverTaken queues the messages of t, whose unit of work committed, to
// be handed out, and reports whether it did; it releases them instead
// when the relay has stopped or their lease leaves their handlers no time.
func (s *subscriber) deliverTaken(t *Taken) bool {
	r := s.r
	c := r.hold(&claim{until: t.until}, t.claimed, len(t.claimed))
	left := min(r.cfg.Timeout, c.until.Sub(r.now())-SettleTimeout)
	if left <= 0 || !s.queueTaken(c, time.Now().Add(left)) {
		r.release(context.Background(), c.msgs)
		return false
	}
	r.metrics.countTaken(c.msgs)
	return true
}

// queueTaken queues c, its handlers' deadline at deadline, to be handed
// out, and reports whether it did: not once the subscriber has stopped
// handing out.
func (s *subscriber) queueTaken(c *claim, deadline time.Time) bool {
	s.takenMu.Lock()
	defer s.takenMu.Unlock()
	if s.takenClosed {
		return false
	}
	s.arm(c, deadline)
	s.takenQueue = append(s.takenQueue, c)
	select {
	case s.takenReady <- struct{}{}:
	default:
	}
	return true
}

// popTaken returns the queued claims of taken messages, and, once closing
// is set, queues no more.
func (s *subscriber) popTaken(closing bool) []*claim {
	s.takenMu.Lock()
	defer s.takenMu.Unlock()
	q := s.takenQueue
	s.takenQueue = nil
	s.takenClosed = s.takenClosed || closing
	return q
}
