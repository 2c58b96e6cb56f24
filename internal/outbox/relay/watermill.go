package relay

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
)

// Metadata keys of the Watermill messages a relay hands to its router. A
// handler's [outbox.Message] is read back from them; the lease's end is there
// for a middleware or a log line that wants it.
const (
	MetadataTopic      = "outbox_topic"
	MetadataAttempts   = "outbox_attempts"
	MetadataKey        = "outbox_key"
	MetadataCreatedAt  = "outbox_created_at"
	MetadataLeaseUntil = "outbox_lease_until"
	// MetadataReason is the failure reason of a delivery, set by a
	// middleware when the handler returns an error, and kept as the
	// message's last error, as Watermill's poison middleware keeps its
	// reason.
	MetadataReason = "outbox_reason"
	// MetadataPermanent is set, by the same middleware, when the
	// handler's error wraps [outbox.ErrPermanent].
	MetadataPermanent = "outbox_permanent"
	// MetadataUnreachable is set, by the same middleware, when the
	// handler's error wraps [outbox.ErrUnreachable].
	MetadataUnreachable = "outbox_unreachable"
	// MetadataDuration is how long the handler took, in nanoseconds, set
	// by a middleware for the relay's outbox.delivery.duration.
	MetadataDuration = "outbox_duration_ns"
	// MetadataTraceParent and MetadataTraceState are the W3C trace
	// context of the message's [outbox.Origin], under the names of its headers;
	// MetadataRequestID is the origin's request ID. Each is set only when
	// the origin has it.
	MetadataTraceParent = "traceparent"
	MetadataTraceState  = "tracestate"
	MetadataRequestID   = "outbox_request_id"
)

// toWatermill returns h as a Watermill message on ctx, the message's
// fields, its origin and its lease in the metadata.
func toWatermill(h *held, ctx context.Context) *message.Message {
	m := h.msg
	wm := message.NewMessage(m.ID.String(), m.Payload)
	wm.Metadata.Set(MetadataTopic, m.Topic)
	wm.Metadata.Set(MetadataAttempts, strconv.Itoa(m.Attempts))
	wm.Metadata.Set(MetadataCreatedAt, m.CreatedAt.Format(time.RFC3339Nano))
	wm.Metadata.Set(MetadataLeaseUntil, h.lease.Until.Format(time.RFC3339Nano))
	if m.Key != "" {
		wm.Metadata.Set(MetadataKey, m.Key)
	}
	if o := h.origin; !o.IsZero() {
		if o.TraceParent != "" {
			wm.Metadata.Set(MetadataTraceParent, o.TraceParent)
		}
		if o.TraceState != "" {
			wm.Metadata.Set(MetadataTraceState, o.TraceState)
		}
		if o.RequestID != "" {
			wm.Metadata.Set(MetadataRequestID, o.RequestID)
		}
	}
	wm.SetContext(ctx)
	return wm
}

// messageFrom returns the [outbox.Message] that wm carries.
func messageFrom(wm *message.Message) (outbox.Message, error) {
	id, err := uuid.Parse(wm.UUID)
	if err != nil {
		return outbox.Message{}, fmt.Errorf("outbox: message id %q: %w", wm.UUID, err)
	}
	attempts, err := strconv.Atoi(wm.Metadata.Get(MetadataAttempts))
	if err != nil {
		return outbox.Message{}, fmt.Errorf("outbox: message %s: attempts: %w", id, err)
	}
	created, err := time.Parse(time.RFC3339Nano, wm.Metadata.Get(MetadataCreatedAt))
	if err != nil {
		return outbox.Message{}, fmt.Errorf("outbox: message %s: creation time: %w", id, err)
	}
	return outbox.Message{
		ID:        id,
		Topic:     wm.Metadata.Get(MetadataTopic),
		Payload:   wm.Payload,
		CreatedAt: created,
		Attempts:  attempts,
		Key:       wm.Metadata.Get(MetadataKey),
	}, nil
}

// consume returns the Watermill handler of a topic: it runs h on the
// message it reads back from the Watermill message.
func consume(h outbox.Handler) message.NoPublishHandlerFunc {
	return func(wm *message.Message) error {
		m, err := messageFrom(wm)
		if err != nil {
			return err
		}
		return h(wm.Context(), m)
	}
}

// middleware returns the relay's router middleware, outermost first. Run
// adds it to its router, and Drain runs each handler under it too.
func (r *Relay) middleware() []message.HandlerMiddleware {
	return []message.HandlerMiddleware{
		r.countReturned,
		r.tracing,
		timing,
		r.reason,
		middleware.Recoverer,
		middleware.Timeout(r.cfg.Timeout),
	}
}

// chain returns h under the relay's middleware.
func (r *Relay) chain(h outbox.Handler) message.HandlerFunc {
	c := consume(h)
	var f message.HandlerFunc = func(wm *message.Message) ([]*message.Message, error) { return nil, c(wm) }
	mw := r.middleware()
	for i := len(mw) - 1; i >= 0; i-- {
		f = mw[i](f)
	}
	return f
}
