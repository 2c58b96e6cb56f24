package smtp

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the tracer of the sends: the package's import path.
const tracerName = "github.com/eventsourced/accounts/internal/smtp"

// Option configures a [Sender].
type Option func(*options)

type options struct{ tp trace.TracerProvider }

// WithTracerProvider makes the span of each send with tp; without it, or
// with nil, otel.GetTracerProvider() makes them.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

func (o options) tracer() trace.Tracer {
	tp := o.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// startSpan starts the span of one send, a child of the span in ctx, when
// ctx carries a valid span context, and returns the function that ends it
// with the send's error. The span names the server and no more: no
// address, subject or body, and of a failure only its type and whether the
// context ended, since the error's text names the recipient.
func (s *Sender) startSpan(ctx context.Context) (context.Context, func(error)) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, func(error) {}
	}
	ctx, span := s.tr.Start(ctx, "smtp send",
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.ServerAddress(s.host), semconv.ServerPort(s.port)))
	return ctx, func(err error) {
		if err != nil {
			what := "send failed"
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				what = "send failed: deadline exceeded"
			case errors.Is(err, context.Canceled):
				what = "send failed: canceled"
			}
			span.SetStatus(codes.Error, what)
			span.SetAttributes(semconv.ErrorType(err))
		}
		span.End()
	}
}
