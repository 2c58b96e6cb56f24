package relay

import (
	"context"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
)

// The subscriber of a running relay takes messages through its store's
// [outbox.Handover], as [outbox.Taker] describes.
var _ outbox.Taker = (*subscriber)(nil)

// Take takes what the relay may deliver at once of msgs, or returns nil:
// the messages without a key whose topic has a handler and a closed
// breaker, while the relay is not draining a backlog and keeps a batch's
// worth of slots free for its claims ([HeldBatches]).
func (s *subscriber) Take(origin outbox.Origin, msgs []outbox.Message) *outbox.Taken {
	r := s.r
	if s.backlog.Load() {
		return nil
	}
	until := r.now().Add(r.cfg.Lease)
	var t *outbox.Taken
	for i, m := range msgs {
		if m.Key != "" || r.handlers[m.Topic] == nil || !r.breakers.isClosed(m.Topic) {
			continue
		}
		if !r.sem.tryAcquireLeaving(1, r.cfg.Batch) {
			break
		}
		if t == nil {
			t = &outbox.Taken{By: s, Until: until, Took: make([]bool, len(msgs))}
		}
		m.Attempts = 1
		t.Took[i] = true
		t.Claimed = append(t.Claimed, outbox.Claimed{Message: m, Origin: origin})
	}
	return t
}

// Committed queues the messages of t, whose unit of work committed, to be
// handed out, and reports whether it did; it releases them instead when
// the relay has stopped or their lease leaves their handlers no time.
func (s *subscriber) Committed(t *outbox.Taken) bool {
	r := s.r
	c := r.hold(&claim{until: t.Until}, t.Claimed, len(t.Claimed))
	left := min(r.cfg.Timeout, c.until.Sub(r.now())-outbox.SettleTimeout)
	if left <= 0 || !s.queueTaken(c, time.Now().Add(left)) {
		r.release(context.Background(), c.msgs)
		return false
	}
	r.metrics.countTaken(c.msgs)
	return true
}

// RolledBack gives the slots of t back, once its unit of work has rolled
// back.
func (s *subscriber) RolledBack(t *outbox.Taken) {
	s.r.sem.release(len(t.Claimed))
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
