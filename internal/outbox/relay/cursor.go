package relay

import (
	"slices"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
)

// cursor is where a relay's next claim starts its scan of the due
// messages. While claims come back full, a backlog is being drained: each
// claim starts at the earliest creation time among what the previous one
// took, which is no later than the earliest due time among them, rather than
// at the head of the due index. On PostgreSQL that head fills with dead
// versions of the messages already claimed and acknowledged, which every
// claim would otherwise step over, and which a long transaction anywhere on
// the server (one that holds the xmin horizon) keeps from being cleaned, so
// that draining a backlog would cost the square of its length.
//
// A message can become due below the cursor: one added by a transaction that
// began before the cursor's time and committed later, one whose topic's
// breaker just closed, one whose lease ended after its relay died. So the
// cursor is dropped whenever a claim comes back short, whenever the topics
// claimed change, and at least once every [outbox.RelayConfig.Interval].
type cursor struct {
	from time.Time
	only []string
	// reset is when the cursor was last dropped.
	reset time.Time
}

// scope returns the scope of the next claim at now of the topics only.
func (c *cursor) scope(now time.Time, only []string, interval time.Duration) outbox.Scope {
	if !slices.Equal(only, c.only) || now.Sub(c.reset) >= interval || now.Before(c.reset) {
		c.from, c.only, c.reset = time.Time{}, only, now
	}
	return outbox.Scope{Only: only, From: c.from}
}

// advance moves the cursor after a claim that took msgs and was full or not.
func (c *cursor) advance(msgs []outbox.Claimed, full bool) {
	if !full || len(msgs) == 0 {
		c.from = time.Time{}
		return
	}
	from := msgs[0].CreatedAt
	for _, m := range msgs[1:] {
		if m.CreatedAt.Before(from) {
			from = m.CreatedAt
		}
	}
	c.from = from
}

// rewind takes the cursor back to at, if it starts later.
func (c *cursor) rewind(at time.Time) {
	if !at.IsZero() && !c.from.IsZero() && at.Before(c.from) {
		c.from = at
	}
}
