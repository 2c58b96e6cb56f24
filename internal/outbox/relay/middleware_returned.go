package relay

import (
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
)

// countReturned is router middleware that counts, in the relay's returned
// [tally], each handler that has returned and whose message is not yet
// settled: the router acks or nacks the message after the handler returns,
// and the subscriber settles it then, so that [Relay.Run], once its router
// has stopped, waits for exactly those settlements.
func (r *Relay) countReturned(h message.HandlerFunc) message.HandlerFunc {
	return func(wm *message.Message) ([]*message.Message, error) {
		out, err := h(wm)
		r.returned.add(1)
		return out, err
	}
}

// tally counts work in progress and lets one wait until none is left.
type tally struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

// add adds d to the count.
func (t *tally) add(d int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n += d
	if t.n == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
}

// wait returns once the count is zero.
func (t *tally) wait() {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return
	}
	if t.zero == nil {
		t.zero = make(chan struct{})
	}
	zero := t.zero
	t.mu.Unlock()
	<-zero
}
