package relay

import (
	"sync"
	"time"
)

// settledKeys tells a relay's claim loop that keyed messages
// ([outbox.Message.Key]) were acknowledged or buried, so that the messages of
// their keys that they held back are due: the loop claims at once instead of
// at its next poll, and takes its cursor back to the earliest creation time
// among the settled, since what they held back may lie behind the cursor. A
// message is created after the one of its key before it unless their clocks
// disagree; one created earlier still is found when the cursor is next
// dropped, within [outbox.RelayConfig.Interval].
type settledKeys struct {
	mu       sync.Mutex
	earliest time.Time
	signal   chan struct{}
}

func newSettledKeys() *settledKeys { return &settledKeys{signal: make(chan struct{}, 1)} }

// add records that the keyed messages created at each of created were
// acknowledged or buried.
func (k *settledKeys) add(created ...time.Time) {
	if len(created) == 0 {
		return
	}
	k.mu.Lock()
	for _, c := range created {
		if k.earliest.IsZero() || c.Before(k.earliest) {
			k.earliest = c
		}
	}
	k.mu.Unlock()
	select {
	case k.signal <- struct{}{}:
	default:
	}
}

// take returns the earliest creation time recorded since the last take.
func (k *settledKeys) take() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.earliest
	k.earliest = time.Time{}
	return t
}

// keyedCreated returns the creation times of the keyed messages of hs.
func keyedCreated(hs []*held) []time.Time {
	var out []time.Time
	for _, h := range hs {
		if h.msg.Key != "" {
			out = append(out, h.msg.CreatedAt)
		}
	}
	return out
}
