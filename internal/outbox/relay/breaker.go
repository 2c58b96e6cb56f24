package relay

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// The circuit breaker's tuning. A topic's breaker opens after breakerFailures
// failures in a row, of at least breakerMessages distinct messages, with no
// success between them: one message that keeps failing on its own while no
// other is sent does not open it, so it is retried and buried as
// [outbox.Backoff] and [outbox.RelayConfig.MaxAttempts] say. A failure that
// wraps [outbox.ErrUnreachable] opens it at once. An open breaker lets one
// probe through after breakerFirstOpen, then after twice as long each time
// the probe fails, up to breakerLongestOpen.
const (
	breakerFailures    = 3
	breakerMessages    = 2
	breakerFirstOpen   = 5 * time.Second
	breakerLongestOpen = time.Minute
)

// breakerState is where a topic's breaker stands. Its values are those of
// the outbox.breaker.state gauge.
type breakerState int

const (
	breakerClosed   breakerState = 0
	breakerHalfOpen breakerState = 1
	breakerOpen     breakerState = 2
)

func (s breakerState) String() string {
	switch s {
	case breakerOpen:
		return "open"
	case breakerHalfOpen:
		return "half-open"
	default:
		return "closed"
	}
}

// breakers are the relay's circuit breakers, one per topic, on the relay's
// clock.
//
// While every delivery of a topic fails, its destination is taken for down:
// the breaker opens, and the relay stops claiming the topic's messages, so
// that they do not spend their attempts on an outage and are still there to
// send when the destination returns. Once the breaker has been open a while
// it is half-open: the relay claims one message of the topic as a probe. A
// probe that is delivered closes the breaker and the topic flows again; one
// that fails opens it for longer. A probe spends one attempt of one message
// per opening, and a probe that ends its message's attempts buries it as any
// failure does.
//
// A failure that is permanent ([outbox.ErrPermanent]) says nothing of whether
// the destination works (the message may not have reached it): it counts
// neither way, and a probe that ends so leaves the breaker half-open for the
// next claim to probe again. A failure to reach the destination at all
// ([outbox.ErrUnreachable]: a connection refused or timed out, a name that
// did not resolve) says it is down, whatever the other messages do: it opens
// the breaker at once, so that one message alone in an outage waits for the
// probes' pace, each probe one attempt, rather than spending its attempts at
// its backoff's: with the defaults, a mail alone in an outage of two and a
// half minutes is delivered at its seventh attempt, where it was buried at
// its eighth.
//
// Two messages of a quiet topic that each fail on their own, with nothing
// delivered between them, look like an outage and open the breaker; they
// are then tried one at a time, as probes, at the probes' pace rather than
// their backoff's, and buried as usual once their attempts are spent.
//
// A library breaker (sony/gobreaker) wraps a call and reads the wall clock;
// this one decides what the relay claims, and runs on the relay's clock so
// that an outage of minutes is tested in no time.
type breakers struct {
	mu     sync.Mutex
	topics map[string]*breaker
	log    *slog.Logger
	// probeLimit bounds how long a probe may stay unanswered (a lease): a
	// probe whose handler never returns counts as failed after it.
	probeLimit time.Duration
	// closed receives a value when a breaker closes, so that the relay
	// claims the topic's messages at once.
	closed chan struct{}
}

// breaker is one topic's state.
type breaker struct {
	state breakerState
	// failures counts the failures since the last success, and failed the
	// distinct messages among them, up to breakerMessages.
	failures int
	failed   []uuid.UUID
	// opened counts the openings since the last success.
	opened int
	// until is when an open breaker lets a probe through.
	until time.Time
	// probe is the message sent as a probe while half-open, and probeEnd
	// when it counts as failed if it has not been answered.
	probe    uuid.UUID
	probeEnd time.Time
}

func newBreakers(topics []string, probeLimit time.Duration, log *slog.Logger) *breakers {
	b := &breakers{topics: make(map[string]*breaker, len(topics)), log: log, probeLimit: probeLimit, closed: make(chan struct{}, 1)}
	for _, t := range topics {
		b.topics[t] = &breaker{}
	}
	return b
}

// openFor returns how long a breaker stays open after its n-th opening in a
// row.
func openFor(n int) time.Duration {
	d := breakerFirstOpen
	for i := 1; i < n && d < breakerLongestOpen; i++ {
		d *= 2
	}
	return min(d, breakerLongestOpen)
}

// plan returns, for a claim at now, the topics to probe (each half-open,
// waiting for [breakers.probing]) and the topics not to claim from: those
// open or half-open.
func (b *breakers) plan(now time.Time) (probe, except []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for topic, br := range b.topics {
		if br.state == breakerHalfOpen && br.probe != uuid.Nil && !now.Before(br.probeEnd) {
			b.reopen(topic, br, now, "the probe was not answered within its lease")
		}
		if br.state == breakerOpen && !now.Before(br.until) {
			br.state, br.probe = breakerHalfOpen, uuid.Nil
		}
		// A half-open breaker without a probe is probed by this claim; one
		// that the claim does not get to (a full batch, a store error)
		// stays so, and the next claim probes it.
		if br.state == breakerHalfOpen && br.probe == uuid.Nil {
			probe = append(probe, topic)
		}
		if br.state != breakerClosed {
			except = append(except, topic)
		}
	}
	slices.Sort(probe)
	slices.Sort(except)
	return probe, except
}

// probing records that id was claimed as the probe of topic at now, or,
// when id is uuid.Nil, that the topic had no message to probe with: it then
// stays open for as long again.
func (b *breakers) probing(topic string, id uuid.UUID, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.topics[topic]
	if br == nil || br.state != breakerHalfOpen {
		return
	}
	if id == uuid.Nil {
		br.state, br.until = breakerOpen, now.Add(openFor(br.opened))
		return
	}
	br.probe, br.probeEnd = id, now.Add(b.probeLimit)
}

// isClosed reports whether topic's breaker is closed: its messages flow.
func (b *breakers) isClosed(topic string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.topics[topic]
	return br == nil || br.state == breakerClosed
}

// next returns the earliest time at which an open breaker lets a probe
// through, and false when none is open.
func (b *breakers) next() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var at time.Time
	for _, br := range b.topics {
		if br.state == breakerOpen && (at.IsZero() || br.until.Before(at)) {
			at = br.until
		}
	}
	return at, !at.IsZero()
}

// unprobed records that the delivery of message id of topic failed for
// good, which counts neither way: when it was the probe, the next claim
// probes again.
func (b *breakers) unprobed(topic string, id uuid.UUID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if br := b.topics[topic]; br != nil && br.state == breakerHalfOpen && br.probe == id {
		br.probe = uuid.Nil
	}
}

// What a breaker hears of one delivery: other than [outcomeDelivered],
// a failure at the destination, or one that did not reach it.
const (
	failedAtDestination = "failed"
	failedUnreachable   = "unreachable"
)

// record counts the outcome of one delivery of message id of topic:
// outcomeDelivered, failedAtDestination or failedUnreachable.
func (b *breakers) record(topic string, id uuid.UUID, outcome string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.topics[topic]
	if br == nil {
		return
	}
	if outcome == outcomeDelivered {
		if br.state != breakerClosed {
			b.log.Info("outbox: circuit closed: deliveries succeed again", "topic", topic, "breaker", breakerClosed.String())
			select {
			case b.closed <- struct{}{}:
			default:
			}
		}
		*br = breaker{}
		return
	}
	switch br.state {
	case breakerClosed:
		if outcome == failedUnreachable {
			b.reopen(topic, br, now, "the destination could not be reached")
			return
		}
		br.failures++
		if !slices.Contains(br.failed, id) && len(br.failed) < breakerMessages {
			br.failed = append(br.failed, id)
		}
		if br.failures >= breakerFailures && len(br.failed) >= breakerMessages {
			b.reopen(topic, br, now, "deliveries of several messages failed in a row")
		}
	case breakerHalfOpen:
		if id == br.probe {
			b.reopen(topic, br, now, "the probe failed")
		}
	}
	// Failures of messages claimed before the breaker opened change
	// nothing more.
}

// reopen opens br at now.
func (b *breakers) reopen(topic string, br *breaker, now time.Time, why string) {
	br.opened++
	br.state, br.until, br.probe = breakerOpen, now.Add(openFor(br.opened)), uuid.Nil
	b.log.Warn("outbox: circuit open: the topic's messages wait instead of spending their attempts",
		"topic", topic, "breaker", breakerOpen.String(), "reason", why, "probe_at", br.until)
}

// states returns each topic's state, for the gauge.
func (b *breakers) states() map[string]breakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := make(map[string]breakerState, len(b.topics))
	for t, br := range b.topics {
		s[t] = br.state
	}
	return s
}
