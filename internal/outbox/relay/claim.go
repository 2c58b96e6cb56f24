package relay

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/outbox"
)

// held is a message that the relay has claimed and not yet settled.
type held struct {
	msg outbox.Message
	// origin is where msg came from: the trace its first delivery joins,
	// and the request its log lines name.
	origin outbox.Origin
	lease  outbox.Lease
	claim  *claim
	// returned is set once the handler has returned, or when none ran.
	returned atomic.Bool
	// overran is set once the handler was found running past the lease.
	overran atomic.Bool
	// took is how long a successful handler took, and span is its
	// delivery's span, which the duration's exemplar names.
	took time.Duration
	span trace.SpanContext
}

// claim is the messages one claim brought. They share its lease's end and,
// under [Relay.Run], the deadline of their handlers.
type claim struct {
	msgs  []*held
	until time.Time
	// left counts the messages not yet settled; the last one to be settled
	// calls cancel, which ends the handlers' shared deadline.
	left   atomic.Int64
	cancel context.CancelFunc
	// ctx is the handlers' context under [Relay.Run].
	ctx context.Context
	// cut, when not nil, ends once a stop's grace has run out
	// ([WithStopGrace]), and ctx with it.
	cut context.Context
}

// claim claims up to limit messages at the relay's now, of the topics it
// has handlers for alone: first, when probes is set, one message of each
// topic whose breaker lets a probe through, then due messages of the
// topics whose breakers are closed, from where cur says. full reports
// whether more may be due: that second claim took all it was asked for, or
// started from a cursor, or a probe was claimed. The caller has acquired
// limit slots of the semaphore; each message takes one, and the slots of
// what was not claimed are released.
func (r *Relay) claim(ctx context.Context, limit int, cur *cursor, probes bool) (c *claim, full bool, err error) {
	now := r.now()
	c = &claim{until: now.Add(r.cfg.Lease)}
	var msgs []outbox.Claimed
	// A claim runs to its end even when ctx ends meanwhile: cut short, its
	// statement may have leased messages that nobody would hold until the
	// lease ends, their attempts spent. The caller releases what it took.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outbox.SettleTimeout)
	defer cancel()
	probe, except := r.breakers.plan(now)
	if !probes {
		probe = nil
	}
	for _, topic := range probe {
		if len(msgs) == limit {
			break
		}
		got, err := r.store.ClaimWithOrigins(outbox.WithScope(sctx, outbox.Scope{Only: []string{topic}}), now, r.cfg.Lease, 1)
		if err != nil {
			r.claimFailed(ctx, err)
			return r.hold(c, msgs, limit), false, err
		}
		r.claimSucceeded(ctx)
		id := uuid.Nil
		if len(got) > 0 {
			id = got[0].ID
		}
		r.breakers.probing(topic, id, now)
		msgs = append(msgs, got...)
	}
	// Once a probe is delivered its topic flows again: claim again then.
	full = len(msgs) > 0
	flowing := r.flowing(except)
	if want := limit - len(msgs); want > 0 && len(flowing) > 0 {
		scope := cur.scope(now, flowing, r.cfg.Interval)
		got, err := r.store.ClaimWithOrigins(outbox.WithScope(sctx, scope), now, r.cfg.Lease, want)
		if err != nil {
			cur.advance(nil, false)
			r.claimFailed(ctx, err)
			return r.hold(c, msgs, limit), false, err
		}
		r.claimSucceeded(ctx)
		cur.advance(got, len(got) == want)
		// A short claim from a cursor may have missed messages due before
		// it: the cursor is dropped, and the caller claims again.
		full = full || len(got) == want || !scope.From.IsZero()
		msgs = append(msgs, got...)
	}
	return r.hold(c, msgs, limit), full, nil
}

// flowing returns the topics that the relay has handlers for, less except,
// sorted. A claim of none of them is not made: an [outbox.Scope] without
// topics would take every topic's messages.
func (r *Relay) flowing(except []string) []string {
	if len(except) == 0 {
		return r.topics
	}
	flowing := make([]string, 0, len(r.topics))
	for _, t := range r.topics {
		if !slices.Contains(except, t) {
			flowing = append(flowing, t)
		}
	}
	return flowing
}

// claimRetryCeiling bounds the wait before [Relay.Run] tries a failed claim
// again.
const claimRetryCeiling = 10 * time.Second

// claimRetryAfter returns how long [Relay.Run] waits before it tries a claim
// again after failures claims failed in a row: [outbox.Backoff], one second
// doubling, up to claimRetryCeiling.
func claimRetryAfter(failures int) time.Duration {
	return min(outbox.Backoff(failures), claimRetryCeiling)
}

// claimFailed counts a failed claim, and logs the first of a run of them at
// error and the others at debug, so that a database that is away for an hour
// does not fill the log; [Relay.claimSucceeded] ends the run.
func (r *Relay) claimFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	r.metrics.storeError(ctx, opClaim)
	r.claimErr.Store(&err)
	if r.claimsFailing.CompareAndSwap(false, true) {
		r.log.ErrorContext(ctx, "outbox: claim failed; the relay tries again within seconds (outbox.store.errors counts the failures)", "error", err)
		return
	}
	r.log.DebugContext(ctx, "outbox: claim failed again", "error", err)
}

// claimSucceeded ends a run of failed claims.
func (r *Relay) claimSucceeded(ctx context.Context) {
	r.claimErr.Store(nil)
	if r.claimsFailing.CompareAndSwap(true, false) {
		r.log.InfoContext(ctx, "outbox: claims succeed again")
	}
}

// hold makes c of the claimed msgs, releases the slots of limit that
// they do not take, and lists c as in flight.
func (r *Relay) hold(c *claim, msgs []outbox.Claimed, limit int) *claim {
	r.sem.release(limit - len(msgs))
	if len(msgs) == 0 {
		return c
	}
	c.msgs = make([]*held, len(msgs))
	for i, m := range msgs {
		c.msgs[i] = &held{msg: m.Message, origin: m.Origin, lease: outbox.Lease{ID: m.ID, Attempts: m.Attempts, Until: c.until}, claim: c}
	}
	c.left.Store(int64(len(msgs)))
	r.inflight.add(c)
	return c
}
