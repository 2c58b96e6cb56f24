package relay

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/outbox"
)

// acker acknowledges the messages that the deliveries of [Relay.Run]
// finish, as [Relay] describes: one goroutine writes everything delivered
// since its last write in one store call, after waiting up to
// the relay's ackDelay for more unless [acker.urgent].
type acker struct {
	r       *Relay
	mu      sync.Mutex
	pending []*held
	spare   []*held
	// keyed is set while a queued message has an ordering key; soonest is
	// the earliest end of the queued messages' leases.
	keyed   bool
	soonest time.Time
	stopped bool
	kick    chan struct{}
	done    chan struct{}
	quit    chan struct{}
}

// ackDelay is how long an acknowledgement may wait for others to join its
// write, unless a test changes it.
const ackDelay = 20 * time.Millisecond

func newAcker(r *Relay) *acker {
	return &acker{r: r, kick: make(chan struct{}, 1), done: make(chan struct{}), quit: make(chan struct{})}
}

// add queues h's acknowledgement. Once the acker has stopped, it
// acknowledges h at once instead.
func (a *acker) add(h *held) {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		a.r.ackNow(h)
		return
	}
	a.pending = append(a.pending, h)
	a.keyed = a.keyed || h.msg.Key != ""
	if a.soonest.IsZero() || h.lease.Until.Before(a.soonest) {
		a.soonest = h.lease.Until
	}
	a.mu.Unlock()
	a.hurry()
}

// hurry makes the acker look again at what waits: the subscriber calls it
// when it finds too few slots free for a claim.
func (a *acker) hurry() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// urgent reports whether what is queued must be written without waiting
// for more: a batch's worth is queued; a queued message has an ordering
// key, whose next message is due only once it is gone; fewer slots are
// free than two claims need, since a queued acknowledgement holds its
// message's slot; or a queued lease would end before a write that waited
// could be retried for [outbox.SettleTimeout].
func (a *acker) urgent() bool {
	a.mu.Lock()
	n, keyed, soonest := len(a.pending), a.keyed, a.soonest
	a.mu.Unlock()
	batch := a.r.cfg.Batch
	return n >= batch || keyed || a.r.sem.available() < 2*batch ||
		(n > 0 && a.r.now().Add(outbox.SettleTimeout+a.r.ackDelay).After(soonest))
}

// run writes acknowledgements until stop is called, then writes the last.
func (a *acker) run() {
	defer close(a.done)
	wait := time.NewTimer(a.r.ackDelay)
	wait.Stop()
	waiting := false
	for {
		select {
		case <-a.kick:
			if a.urgent() {
				if waiting {
					wait.Stop()
					waiting = false
				}
				a.flush()
			} else if !waiting {
				wait.Reset(a.r.ackDelay)
				waiting = true
			}
		case <-wait.C:
			waiting = false
			a.flush()
		case <-a.quit:
			a.mu.Lock()
			a.stopped = true
			a.mu.Unlock()
			a.flush()
			return
		}
	}
}

// stop makes run write what is queued and return, and waits for it.
func (a *acker) stop() {
	close(a.quit)
	<-a.done
}

// flush writes every queued acknowledgement in one call and gives their
// slots back.
func (a *acker) flush() {
	a.mu.Lock()
	batch := a.pending
	if len(batch) == 0 {
		a.mu.Unlock()
		return
	}
	a.pending, a.spare, a.keyed, a.soonest = a.spare[:0], nil, false, time.Time{}
	a.mu.Unlock()
	a.r.delivered(context.Background(), batch)
	leases := make([]outbox.Lease, len(batch))
	for i, h := range batch {
		leases[i] = h.lease
	}
	if a.write(leases) {
		a.r.settledKeys.add(keyedCreated(batch)...)
	}
	for i, h := range batch {
		a.r.settled(h)
		batch[i] = nil
	}
	a.mu.Lock()
	a.spare = batch[:0]
	a.mu.Unlock()
}

// write acknowledges leases, trying again after a growing pause while the
// store fails, for at most [outbox.SettleTimeout], and reports whether it did.
func (a *acker) write(leases []outbox.Lease) bool {
	ctx, cancel := context.WithTimeout(context.Background(), outbox.SettleTimeout)
	defer cancel()
	pause := 10 * time.Millisecond
	for {
		err := a.r.ackAll(ctx, leases)
		if err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			a.r.ackFailed(ctx, len(leases), err)
			return false
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// ackNow acknowledges h at once, in a store call of its own, and gives its
// slot back.
func (r *Relay) ackNow(h *held) {
	ctx, cancel := context.WithTimeout(context.Background(), outbox.SettleTimeout)
	defer cancel()
	r.delivered(ctx, []*held{h})
	if err := r.ackAll(ctx, []outbox.Lease{h.lease}); err != nil {
		r.ackFailed(ctx, 1, err)
	} else {
		r.settledKeys.add(keyedCreated([]*held{h})...)
	}
	r.settled(h)
}

// delivered counts the deliveries of hs, by topic. The acknowledger calls
// it once for what it writes together, rather than each delivery's
// goroutine for its own.
func (r *Relay) delivered(ctx context.Context, hs []*held) {
	var topic string
	n := int64(0)
	flush := func() {
		if n > 0 {
			r.metrics.delivered.Add(ctx, n, r.metrics.topic(topic))
		}
	}
	for _, h := range hs {
		if h.msg.Topic != topic {
			flush()
			topic, n = h.msg.Topic, 0
		}
		n++
		mctx := ctx
		if h.span.IsValid() {
			// Only a delivery's span makes an exemplar: with tracing off
			// there is none, and no context is made per message.
			mctx = trace.ContextWithSpanContext(ctx, h.span)
		}
		r.metrics.observeDuration(mctx, topic, outcomeDelivered, h.took)
	}
	flush()
}

// ackAll acknowledges delivered messages under their leases, in one call.
// A failure is counted.
func (r *Relay) ackAll(ctx context.Context, leases []outbox.Lease) error {
	err := r.store.AckAll(ctx, leases)
	if err != nil {
		r.metrics.storeError(ctx, opAck)
	}
	return err
}

// ackFailed logs acknowledgements given up on: their messages are delivered
// again once their leases end.
func (r *Relay) ackFailed(ctx context.Context, n int, err error) {
	r.log.ErrorContext(ctx, "outbox: ack; the messages will be delivered again when their leases end",
		"messages", n, "error", err)
}
