package relay

import (
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/eventsourced/accounts/internal/outbox"
)

// reason is router middleware that keeps why a handler failed in the
// message's [MetadataReason], which the relay records as the message's
// last error when the message is nacked, and marks a failure that wraps
// [outbox.ErrPermanent] with [MetadataPermanent], and one that wraps
// [outbox.ErrUnreachable] with [MetadataUnreachable]. A panic, recovered by the
// middleware inside it, is logged with its stack and kept as "panic: " and
// its value.
func (r *Relay) reason(h message.HandlerFunc) message.HandlerFunc {
	return func(wm *message.Message) ([]*message.Message, error) {
		out, err := h(wm)
		if err == nil {
			return out, nil
		}
		reason := err.Error()
		var p middleware.RecoveredPanicError
		if errors.As(err, &p) {
			reason = fmt.Sprintf("panic: %v", p.V)
			// The message's context carries its request ID ([Relay.tracing]),
			// which the service's log handler adds to the line.
			r.log.ErrorContext(wm.Context(), "outbox: handler panicked",
				"id", wm.UUID, "topic", wm.Metadata.Get(MetadataTopic), "panic", p.V, "stack", p.Stacktrace)
		}
		wm.Metadata.Set(MetadataReason, reason)
		if errors.Is(err, outbox.ErrPermanent) {
			wm.Metadata.Set(MetadataPermanent, "true")
		}
		if errors.Is(err, outbox.ErrUnreachable) {
			wm.Metadata.Set(MetadataUnreachable, "true")
		}
		return out, err
	}
}
