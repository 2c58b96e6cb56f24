package aggregate

import "time"

// Window is a limit a decision keeps from its stream's history: at most
// Limit requests, at least 1, within any span of time Per, sliding. The
// times of the earlier requests are in the events, so the limit needs no
// table of its own and holds as exactly as the stream's version does.
type Window struct {
	Limit int
	Per   time.Duration
}

// RetryAfter returns how long one more request must wait at now, after
// requests made at the given times, oldest first; 0 when it may be made
// now.
func (w Window) RetryAfter(requests []time.Time, now time.Time) time.Duration {
	since := now.Add(-w.Per)
	var recent []time.Time
	for _, t := range requests {
		if t.After(since) {
			recent = append(recent, t)
		}
	}
	if len(recent) < w.Limit {
		return 0
	}
	// The oldest request that keeps the count at the limit must leave the
	// window first.
	return recent[len(recent)-w.Limit].Add(w.Per).Sub(now)
}
