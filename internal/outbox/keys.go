package outbox

import (
	"sync"
	"time"
)

// freed tells a relay's claim loop that keyed messages were settled, so
// that the messages of their keys that they held back are due: the loop
// claims at once instead of at its next poll, and takes its cursor back to
// the earliest creation time among the settled, since what they held back
// may lie behind the cursor. A message is created after the one of its key
// before it unless their clocks disagree; one created earlier still is
// found when the cursor is next dropped, within [RelayConfig.Interval].
type freed struct {
	mu       sync.Mutex
	earliest time.Time
	signal   chan struct{}
}

func newFreed() *freed { return &freed{signal: make(chan struct{}, 1)} }

// settled records that the keyed messages created at each of created were
// acknowledged or buried.
func (f *freed) settled(created ...time.Time) {
	if len(created) == 0 {
		return
	}
	f.mu.Lock()
	for _, c := range created {
		if f.earliest.IsZero() || c.Before(f.earliest) {
			f.earliest = c
		}
	}
	f.mu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// take returns the earliest creation time recorded since the last take.
func (f *freed) take() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.earliest
	f.earliest = time.Time{}
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

// rewind takes the cursor back to at, if it starts later.
func (c *cursor) rewind(at time.Time) {
	if !at.IsZero() && !c.from.IsZero() && at.Before(c.from) {
		c.from = at
	}
}
