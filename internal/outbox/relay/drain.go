package relay

import (
	"context"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
)

// abandonGrace is how long [Relay.Drain] waits past a handler's timeout for
// it to return before it goes on without it.
const abandonGrace = 100 * time.Millisecond

// DrainStats counts what one [Relay.Drain] did.
type DrainStats struct {
	Claimed, Delivered, Retried, Buried int
	// Running counts the deliveries whose handler had not returned at its
	// timeout: their messages stay leased until the handler returns, and
	// [Relay.Wait] waits for them.
	Running int
}

// Drain delivers the messages due now, one at a time, batch after batch,
// until a claim returns fewer than [outbox.RelayConfig.Batch] and settles no
// keyed message ([outbox.Message.Key]) whose successor could now be due. It
// is the relay's synchronous pass, for operators and tests.
//
// Handlers run on a context that ctx's end does not cancel, bounded by
// [outbox.RelayConfig.Timeout]: when ctx ends, the delivery in flight
// finishes and the rest of the batch is released, due again at once. So is
// the rest of a batch whose lease no longer leaves time for one more delivery
// and its settling. A handler that has not returned shortly after its timeout
// is left running, its message leased, and the pass goes on without it.
func (r *Relay) Drain(ctx context.Context) (DrainStats, error) {
	var stats DrainStats
	var cur cursor
	for ctx.Err() == nil {
		// Keyed messages settled by the last batch may have let others of
		// their keys become due, perhaps behind the cursor.
		settledKey := false
		cur.rewind(r.settledKeys.take())
		r.inflight.sweep(r.now(), r.reportOverran)
		n := r.sem.tryAcquire(r.cfg.Batch)
		if n == 0 {
			r.log.WarnContext(ctx, "outbox: every slot is held by a handler still running; the pass ends")
			break
		}
		c, full, err := r.claim(ctx, n, &cur, true)
		stats.Claimed += len(c.msgs)
		released := false
		for i, h := range c.msgs {
			// A delivery may take Timeout and its settling SettleTimeout;
			// start one only while the lease has that much left. A valid
			// config leaves the first that much when the claim is made, so
			// the first always starts.
			if ctx.Err() != nil || (i > 0 && h.lease.Until.Sub(r.now()) < r.cfg.Timeout+outbox.SettleTimeout) {
				r.release(ctx, c.msgs[i:])
				released = true
				break
			}
			outcome := r.drainOne(ctx, h)
			if h.msg.Key != "" && (outcome == outcomeDelivered || outcome == outcomeBuried) {
				settledKey = true
			}
			switch outcome {
			case outcomeDelivered:
				stats.Delivered++
			case outcomeRetried:
				stats.Retried++
			case outcomeBuried:
				stats.Buried++
			case outcomeRunning:
				stats.Running++
			}
		}
		if err != nil {
			return stats, err
		}
		// Released messages are due at once: claiming again would only
		// take them back, so the pass ends here. A short claim ends it
		// too, unless a keyed message was settled: the next of its key
		// may be due now.
		if released || (!full && !settledKey) {
			break
		}
	}
	return stats, ctx.Err()
}

// drainOne delivers h for Drain and returns its outcome, or outcomeRunning
// when its handler is still running shortly after its timeout: it is then
// settled, and its slot released, once the handler returns.
func (r *Relay) drainOne(ctx context.Context, h *held) string {
	if r.foreign(ctx, h) {
		return outcomeReleased
	}
	if why := r.refusal(h); why != nil {
		return r.refuse(h, why)
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
	wm := toWatermill(h, hctx)
	handle := r.chains[h.msg.Topic]
	done := make(chan string, 1)
	go func() {
		defer cancel()
		// The pass runs the handler under the router's middleware itself,
		// one at a time, rather than through a router and subscriber of
		// its own; it settles as Run does.
		_, err := handle(wm)
		done <- r.settle(h, wm, err != nil, r.ackNow)
	}()
	wait := time.NewTimer(r.cfg.Timeout + abandonGrace)
	defer wait.Stop()
	select {
	case outcome := <-done:
		return outcome
	case <-wait.C:
		r.log.WarnContext(ctx, "outbox: handler did not return at its timeout; its message stays leased until it does or the lease ends",
			h.logArgs("timeout", r.cfg.Timeout)...)
		return outcomeRunning
	}
}
