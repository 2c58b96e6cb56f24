package outbox

import (
	"context"
	"sync"
	"time"
)

// acker acknowledges the messages that the deliveries of [Relay.Run]
// finish, coalescing them: one goroutine writes everything delivered since
// its last write in one store call, so that a delivered message waits for
// at most the write in progress, never for the rest of its batch, and a
// busy relay writes many acknowledgements per round trip.
type acker struct {
	r       *Relay
	mu      sync.Mutex
	pending []*held
	spare   []*held
	stopped bool
	kick    chan struct{}
	done    chan struct{}
	quit    chan struct{}
}

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
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// run writes acknowledgements until stop is called, then writes the last.
func (a *acker) run() {
	defer close(a.done)
	for {
		select {
		case <-a.kick:
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
	a.pending, a.spare = a.spare[:0], nil
	a.mu.Unlock()
	a.r.delivered(context.Background(), batch)
	leases := make([]Lease, len(batch))
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
// store fails, for at most [SettleTimeout], and reports whether it did.
func (a *acker) write(leases []Lease) bool {
	ctx, cancel := context.WithTimeout(context.Background(), SettleTimeout)
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
