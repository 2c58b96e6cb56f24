package outbox

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// held is a message that the relay has claimed and not yet settled.
type held struct {
	msg   Message
	lease Lease
	claim *claim
	// returned is set once the handler has returned, or when none ran.
	returned atomic.Bool
	// overran is set once the handler was found running past the lease.
	overran atomic.Bool
	// took is how long a successful handler took.
	took time.Duration
}

// claim is the messages one claim brought. They share its lease's end and,
// under [Relay.Run], the deadline of their handlers.
type claim struct {
	msgs  []*held
	until time.Time
	// left counts the messages not yet settled; the last one to be settled
	// calls cancel, which ends the handlers' shared deadline.
	left   atomic.Int64
	cancel context.CancelFunc
	// ctx is the handlers' context under [Relay.Run].
	ctx context.Context
	// cut, when not nil, ends once a stop's grace has run out
	// ([WithStopGrace]), and ctx with it.
	cut context.Context
}

type heldKey struct{}

// heldFrom returns the held message a Watermill message of the relay
// carries in its context.
func heldFrom(ctx context.Context) *held {
	h, _ := ctx.Value(heldKey{}).(*held)
	return h
}

// room bounds how many messages a relay holds: claimed and not yet settled
// in the store. A message takes its place when it is claimed and gives it
// back once its outcome is recorded (its acknowledgement written, its
// retry or burial recorded, or its release).
type room struct {
	mu   sync.Mutex
	free int
	size int
	// kick tells the claiming loop that room was given back.
	kick chan struct{}
	// idle, when not nil, is closed once nothing is held.
	idle chan struct{}
}

func newRoom(size int) *room {
	return &room{free: size, size: size, kick: make(chan struct{}, 1)}
}

// available returns how many places are free.
func (r *room) available() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.free
}

// take takes up to n free places and returns how many it took.
func (r *room) take(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n = min(n, r.free)
	r.free -= n
	return n
}

// give gives n places back.
func (r *room) give(n int) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	r.free += n
	if r.free == r.size && r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// wait returns once nothing is held, or ctx's error when it ends first.
func (r *room) wait(ctx context.Context) error {
	r.mu.Lock()
	if r.free == r.size {
		r.mu.Unlock()
		return nil
	}
	if r.idle == nil {
		r.idle = make(chan struct{})
	}
	idle := r.idle
	r.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// inflight lists the claims whose messages are not all settled, so that the
// relay can tell which handlers are still running when their lease ends.
type inflight struct {
	mu     sync.Mutex
	claims []*claim
}

func (f *inflight) add(c *claim) {
	f.mu.Lock()
	f.claims = append(f.claims, c)
	f.mu.Unlock()
}

// sweep forgets the claims that are settled and calls overran once for each
// handler still running at now when its lease has ended.
func (f *inflight) sweep(now time.Time, overran func(*held)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kept := f.claims[:0]
	for _, c := range f.claims {
		if c.left.Load() == 0 {
			continue
		}
		kept = append(kept, c)
		if now.Before(c.until) {
			continue
		}
		for _, h := range c.msgs {
			if !h.returned.Load() && h.overran.CompareAndSwap(false, true) {
				overran(h)
			}
		}
	}
	clear(f.claims[len(kept):])
	f.claims = kept
}

// reportOverran counts and logs a handler still running when its lease
// ended: from now on another claim may deliver its message beside it.
func (r *Relay) reportOverran(h *held) {
	ctx := context.Background()
	r.metrics.overran.Add(ctx, 1, r.metrics.topic(h.msg.Topic))
	r.log.Log(ctx, slog.LevelError, "outbox: handler still running when its lease ended; the message may be delivered again beside it",
		"id", h.msg.ID, "topic", h.msg.Topic, "attempts", h.msg.Attempts, "lease_end", h.lease.Until)
}
