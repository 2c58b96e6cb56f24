package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// dispatch runs the handler of the message's topic. It is the innermost
// Watermill handler of the relay's middleware chain.
func (r *Relay) dispatch(wm *message.Message) ([]*message.Message, error) {
	h := heldFrom(wm.Context())
	if h == nil {
		return nil, fmt.Errorf("outbox: message %s was not claimed by this relay", wm.UUID)
	}
	handler, ok := r.handlers[h.msg.Topic]
	if !ok {
		return nil, fmt.Errorf("%w %q", errNoHandler, h.msg.Topic)
	}
	return nil, handler(wm.Context(), h.msg)
}

// deliver runs h's handler under the middleware, on wm's context, and
// records the outcome. A success is handed to ack, which acknowledges it
// and calls [Relay.settled]; any other outcome is recorded here.
func (r *Relay) deliver(wm *message.Message, h *held, ack func(*held)) string {
	m := h.msg
	start := time.Now()
	failure := r.policy(m.Topic).overclaimed(m, r.now)
	if failure == nil {
		_, failure = r.chain(wm)
	}
	h.returned.Store(true)
	ctx := context.WithoutCancel(wm.Context())
	took := time.Since(start)
	if failure == nil {
		// The acknowledgement counts the delivery, with others at once.
		h.took = took
		ack(h)
		return outcomeDelivered
	}
	if cut := h.claim.cut; cut != nil && cut.Err() != nil {
		// The stop's grace ran out: the failure is the stop's, not the
		// destination's, so the breaker hears nothing of it.
		r.log.InfoContext(ctx, "outbox: delivery cut short by the stop; its message is released, due again at once",
			"id", m.ID, "topic", m.Topic, "attempts", m.Attempts-1)
		r.release(ctx, []*held{h})
		return outcomeReleased
	}
	if !errors.Is(failure, errNoHandler) && !errors.Is(failure, errOverclaimed) {
		r.breakers.record(m.Topic, m.ID, false, r.now())
	}
	sctx, cancel := context.WithTimeout(WithLease(ctx, h.lease), SettleTimeout)
	defer cancel()
	outcome := r.fail(sctx, h, failure)
	if outcome != outcomeLost {
		r.metrics.observeDuration(ctx, m.Topic, outcome, took)
	}
	r.settled(h)
	return outcome
}

// toWatermill returns h as a Watermill message on ctx, with its topic and
// attempts in the metadata, and h itself in the context.
func (r *Relay) toWatermill(h *held, ctx context.Context) *message.Message {
	wm := message.NewMessage(h.msg.ID.String(), h.msg.Payload)
	wm.Metadata.Set(MetadataTopic, h.msg.Topic)
	wm.Metadata.Set(MetadataAttempts, strconv.Itoa(h.msg.Attempts))
	wm.SetContext(context.WithValue(ctx, heldKey{}, h))
	return wm
}

type heldKey struct{}

// heldFrom returns the held message a Watermill message of the relay
// carries in its context.
func heldFrom(ctx context.Context) *held {
	h, _ := ctx.Value(heldKey{}).(*held)
	return h
}
