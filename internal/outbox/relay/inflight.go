package relay

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

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
		h.logArgs("attempts", h.msg.Attempts, "lease_end", h.lease.Until)...)
}
