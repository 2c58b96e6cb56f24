package relay

import (
	"context"
	"strconv"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/requestid"
)

// tracerName names the relay's tracer: the outbox's import path, as it
// was before the relay had a package of its own, so that its spans keep
// their instrumentation scope.
const tracerName = "github.com/eventsourced/accounts/internal/outbox"

// Attributes of a delivery's span beside the messaging conventions'.
const (
	attrAttempt = attribute.Key("outbox.attempt")
	attrOutcome = attribute.Key("outbox.outcome")
)

// tracing is router middleware that runs the handler under one span per
// delivery, named "outbox deliver" and the topic, and with the request ID
// of the message's origin in its context, so that what the handler sends
// (a mail, a publish) is a child span of the delivery and its log lines
// name the request. The span ends when the delivery is settled
// ([Relay.settle]), with its outcome.
//
// The first attempt is a child of the origin's span, in the request's
// trace. A later attempt starts a trace of its own, linked to the origin:
// a retry may run minutes or hours after the request, and a trace that
// lasts hours is cut short by tail sampling and drawn as one long gap in
// trace views; the link keeps the way back to the request.
func (r *Relay) tracing(h message.HandlerFunc) message.HandlerFunc {
	return func(wm *message.Message) ([]*message.Message, error) {
		// With tracing off there is no span of the delivery, and a span
		// in wm's context is someone else's: it is left alone.
		ctx, span := wm.Context(), trace.Span(nil)
		if r.tracer != nil {
			ctx, span = r.startDelivery(wm)
		}
		if id := wm.Metadata.Get(MetadataRequestID); id != "" {
			ctx = requestid.With(ctx, id)
		}
		wm.SetContext(ctx)
		out, err := h(wm)
		if err != nil && span != nil {
			// The error's text may name a recipient: only its type is kept.
			span.SetStatus(codes.Error, "handler failed")
			span.SetAttributes(semconv.ErrorType(err))
		}
		return out, err
	}
}

// startDelivery starts the span of wm's delivery on wm's context.
func (r *Relay) startDelivery(wm *message.Message) (context.Context, trace.Span) {
	ctx := wm.Context()
	topic := wm.Metadata.Get(MetadataTopic)
	attempt, _ := strconv.Atoi(wm.Metadata.Get(MetadataAttempts))
	// The origin is W3C trace context, whatever the global propagator is.
	origin := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(wm.Metadata)))
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingDestinationName(topic),
			semconv.MessagingMessageID(wm.UUID),
			attrAttempt.Int(attempt),
		),
	}
	switch {
	case origin.IsValid() && attempt == 1:
		ctx = trace.ContextWithRemoteSpanContext(ctx, origin)
	case origin.IsValid():
		opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: origin}))
	default:
		opts = append(opts, trace.WithNewRoot())
	}
	name, ok := r.spanNames[topic]
	if !ok {
		name = spanName(topic)
	}
	return r.tracer.Start(ctx, name, opts...)
}

// spanName is the name of the span of a delivery of topic.
func spanName(topic string) string { return "outbox deliver " + topic }

// endDelivery ends the span of wm's delivery with its outcome, if the
// relay started one.
func (r *Relay) endDelivery(wm *message.Message, outcome string) {
	if r.tracer == nil {
		return
	}
	span := trace.SpanFromContext(wm.Context())
	span.SetAttributes(attrOutcome.String(outcome))
	span.End()
}
