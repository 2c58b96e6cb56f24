package relay

import (
	"context"
	"errors"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/outbox"
)

// Outcomes of one delivery.
const (
	outcomeDelivered = "delivered"
	outcomeRetried   = "retried"
	outcomeBuried    = "buried"
	// outcomeLost is a delivery whose outcome was not recorded: its lease
	// was lost, or the store could not be reached. The message is due again
	// when its lease ends.
	outcomeLost = "lost"
	// outcomeRunning is a delivery of [Relay.Drain] whose handler had not
	// returned at its timeout; it is settled once it returns.
	outcomeRunning = "running"
	// outcomeReleased is a delivery cut short by the end of a stop's grace
	// ([WithStopGrace]): its message is due again at once, its attempt
	// given back.
	outcomeReleased = "released"
)

// settled releases h's slot once its outcome is recorded, or given up.
func (r *Relay) settled(h *held) {
	h.returned.Store(true)
	if h.claim.left.Add(-1) == 0 && h.claim.cancel != nil {
		h.claim.cancel()
	}
	r.sem.release(1)
}

// release makes claimed messages that were not handed to a handler due
// again at once, instead of when their lease ends, and gives back the
// attempts their claim counted.
func (r *Relay) release(ctx context.Context, hs []*held) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outbox.SettleTimeout)
	defer cancel()
	now := r.now()
	for _, h := range hs {
		l := h.lease
		l.Released = true
		err := r.store.Retry(outbox.WithLease(ctx, l), h.msg.ID, now, "released undelivered")
		if err != nil && !errors.Is(err, outbox.ErrLeaseLost) {
			r.metrics.storeError(ctx, opRelease)
			r.log.WarnContext(ctx, "outbox: release", h.logArgs("error", err)...)
		}
		r.settled(h)
	}
}

// settle records the outcome of h's delivery once its handler, under the
// relay's middleware, has returned: an ack (failed false) is handed to ack,
// which acknowledges it and calls [Relay.settled]; a nack is retried or
// buried here (at once when the middleware marked it permanent), with the
// reason the middleware kept in wm. It returns the outcome.
//
// It ends the delivery's span with the outcome.
func (r *Relay) settle(h *held, wm *message.Message, failed bool, ack func(*held)) (outcome string) {
	defer r.returned.add(-1)
	defer func() { r.endDelivery(wm, outcome) }()
	h.returned.Store(true)
	m := h.msg
	took := tookFrom(wm)
	if !failed {
		// The breaker hears of the success now: the acknowledgement may
		// wait, and a success heard late could close a breaker that
		// failures opened meanwhile. The acknowledgement counts the
		// delivery, with the others it writes.
		r.breakers.record(m.Topic, m.ID, outcomeDelivered, r.now())
		h.took, h.span = took, trace.SpanContextFromContext(wm.Context())
		ack(h)
		return outcomeDelivered
	}
	ctx := context.Background()
	reason := wm.Metadata.Get(MetadataReason)
	if reason == "" {
		reason = "nacked"
	}
	if cut := h.claim.cut; cut != nil && cut.Err() != nil {
		// The stop's grace ran out: the failure is the stop's, not the
		// destination's, so the breaker hears nothing of it.
		r.log.InfoContext(ctx, "outbox: delivery cut short by the stop; its message is released, due again at once",
			h.logArgs("attempts", m.Attempts-1)...)
		r.release(ctx, []*held{h})
		return outcomeReleased
	}
	permanent := wm.Metadata.Get(MetadataPermanent) != ""
	switch {
	case permanent:
		r.breakers.unprobed(m.Topic, m.ID)
	case wm.Metadata.Get(MetadataUnreachable) != "":
		r.breakers.record(m.Topic, m.ID, failedUnreachable, r.now())
	default:
		r.breakers.record(m.Topic, m.ID, failedAtDestination, r.now())
	}
	sctx, cancel := context.WithTimeout(outbox.WithLease(ctx, h.lease), outbox.SettleTimeout)
	defer cancel()
	outcome = r.fail(sctx, h, reason, permanent || r.policy(m.Topic).spent(m, r.now))
	if outcome != outcomeLost {
		r.metrics.observeDuration(trace.ContextWithSpanContext(ctx, trace.SpanContextFromContext(wm.Context())), m.Topic, outcome, took)
	}
	r.settled(h)
	return outcome
}

// refuse buries h's message without handing it to a handler, for why: it
// was claimed more often than its policy allows without finishing. The
// breaker hears nothing of it.
func (r *Relay) refuse(h *held, why error) string {
	h.returned.Store(true)
	sctx, cancel := context.WithTimeout(outbox.WithLease(context.Background(), h.lease), outbox.SettleTimeout)
	defer cancel()
	outcome := r.fail(sctx, h, why.Error(), true)
	if outcome != outcomeLost {
		r.metrics.observeDuration(sctx, h.msg.Topic, outcome, 0)
	}
	r.settled(h)
	return outcome
}

// refusal returns why h's message must be buried before it is handed to a
// handler, or nil.
func (r *Relay) refusal(h *held) error {
	return r.policy(h.msg.Topic).overclaimed(h.msg, r.now)
}

// foreign reports whether h's message is of a topic the relay has no handler
// for, which no claim of the relay asks for: a store that ignored the claim's
// [outbox.Scope] returned it. It is then released, due again at once with its
// attempt given back, for a relay that has the handler.
func (r *Relay) foreign(ctx context.Context, h *held) bool {
	if _, ok := r.handlers[h.msg.Topic]; ok {
		return false
	}
	r.log.ErrorContext(ctx, "outbox: the store returned a message of a topic the claim did not ask for; released",
		h.logArgs()...)
	r.release(ctx, []*held{h})
	return true
}

// fail retries h's message after its backoff, or buries it when bury is
// set, under its lease, and returns which, or outcomeLost when neither was
// recorded.
func (r *Relay) fail(ctx context.Context, h *held, reason string, bury bool) string {
	m := h.msg
	if bury {
		if err := r.store.Bury(ctx, m.ID, reason); err != nil {
			return r.notRecorded(ctx, h, opBury, reason, err)
		}
		r.metrics.buried.Add(ctx, 1, r.metrics.topic(m.Topic))
		r.settledKeys.add(keyedCreated([]*held{h})...)
		r.log.ErrorContext(ctx, "outbox: message buried", h.logArgs("attempts", m.Attempts, "reason", reason)...)
		return outcomeBuried
	}
	at := r.now().Add(outbox.Backoff(m.Attempts))
	if err := r.store.Retry(ctx, m.ID, at, reason); err != nil {
		return r.notRecorded(ctx, h, opRetry, reason, err)
	}
	r.metrics.retried.Add(ctx, 1, r.metrics.topic(m.Topic))
	r.log.WarnContext(ctx, "outbox: delivery failed, will retry", h.logArgs("attempts", m.Attempts, "retry_at", at, "reason", reason)...)
	return outcomeRetried
}

// logArgs returns the attributes of a log line about h's message: its ID,
// topic and the request that added it, when known, then more.
func (h *held) logArgs(more ...any) []any {
	args := make([]any, 0, 6+len(more))
	args = append(args, "id", h.msg.ID, "topic", h.msg.Topic)
	if id := h.origin.RequestID; id != "" {
		args = append(args, "request_id", id)
	}
	return append(args, more...)
}

// notRecorded logs a failure whose outcome the store did not take. The
// message is due again when its lease ends.
func (r *Relay) notRecorded(ctx context.Context, h *held, op, reason string, err error) string {
	m := h.msg
	if errors.Is(err, outbox.ErrLeaseLost) {
		r.metrics.leaseLost.Add(ctx, 1, r.metrics.topic(m.Topic))
		r.log.WarnContext(ctx, "outbox: the message was claimed again meanwhile; this delivery's failure is not recorded",
			h.logArgs("attempts", m.Attempts, "reason", reason)...)
		return outcomeLost
	}
	r.metrics.storeError(ctx, op)
	r.log.ErrorContext(ctx, "outbox: record failed delivery; the message is due again when its lease ends",
		h.logArgs("operation", op, "reason", reason, "error", err)...)
	return outcomeLost
}
