package user

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// tracerName names the tracer of the commands: the package's import path.
const tracerName = "github.com/eventsourced/accounts/internal/user"

// The attributes and events of a command's span.
//
// The span names no stream: the sign-in stream of an address is
// "signin-HASH", a keyed hash of the address's mailbox ([signInStream]),
// and a hash of an address is still personal data. It would tie together every
// trace of one person, stay in the trace store after an erasure, and
// answer a guess at the address by anyone who holds the key.
const (
	// attrTries counts the times a command ran: 1, or more after it lost a
	// race with a concurrent one.
	attrTries = attribute.Key("user.command.tries")
	// attrTry numbers the try that lost, on an eventLostRace.
	attrTry = attribute.Key("user.command.try")
	// attrDone counts what a job ([Service.job]) deleted or forgot.
	attrDone = attribute.Key("user.job.done")
	// eventLostRace marks a try that lost a race and is run again.
	eventLostRace = "lost race"
	// eventConditionFailed marks a try that appended on a presumption
	// about its stream and failed: the stream's recent events did not
	// meet the condition, or another command appended to it first
	// ([Service.doPresuming]). The command runs again at once.
	eventConditionFailed = "condition failed"
)

// WithTracerProvider makes the span of each command and query with tp;
// without it, or with nil, otel.GetTracerProvider() makes them.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *Service) { s.tp = tp }
}

// tracer returns the tracer of the service's spans.
func (s *Service) tracer() trace.Tracer {
	tp := s.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// startCommand starts the span of the command or query name, such as
// "user.SignIn", a child of the span in ctx.
func (s *Service) startCommand(ctx context.Context, name string) (context.Context, trace.Span) {
	return s.tr.Start(withCommand(ctx, name), name, trace.WithSpanKind(trace.SpanKindInternal))
}

// job runs fn, a job of many units of work such as a sweep, as one span
// named name, so that its units of work are one trace and not one each,
// with the number fn returns of what it deleted or forgot.
func (s *Service) job(ctx context.Context, name string, fn func(ctx context.Context) (int64, error)) (int64, error) {
	ctx, span := s.startCommand(ctx, name)
	defer endOnPanic(span)
	n, err := fn(ctx)
	span.SetAttributes(attrDone.Int64(n))
	endCommand(span, err)
	return n, err
}

// endOnPanic ends span as failed when its command panics, and panics
// again; a command defers it, so that a panic, which net/http recovers,
// leaves no span open.
func endOnPanic(span trace.Span) {
	if p := recover(); p != nil {
		span.SetStatus(codes.Error, "command panicked")
		span.End()
		panic(p)
	}
}

// lostRace notes on span that try, counted from 1, lost a race.
func lostRace(span trace.Span, try int) {
	span.AddEvent(eventLostRace, trace.WithAttributes(attrTry.Int(try)))
}

// endCommand ends span with the outcome err. Of an error it keeps the
// type alone ([errorType]): the text of a command's error may quote an
// address. A refusal (a bad code, a limit, no session, a taken address)
// is an error too, described as a refusal, so that it can be told from a
// failure.
func endCommand(span trace.Span, err error) {
	if err != nil {
		what := "command failed"
		if refused(err) {
			what = "command refused"
		}
		span.SetStatus(codes.Error, what)
		span.SetAttributes(errorType(err))
	}
	span.End()
}

// knownErrors are the errors a command's span names by their own name
// ([errorType]), which says more than the type of a wrapped sentinel
// ("*fmt.wrapError"); refusal marks those by which the domain refuses a
// command, rather than fails to run it.
var knownErrors = []struct {
	err     error
	name    string
	refusal bool
}{
	{ErrInvalidCode, "user.ErrInvalidCode", true},
	{ErrUnauthenticated, "user.ErrUnauthenticated", true},
	{ErrEmailTaken, "user.ErrEmailTaken", true},
	{ErrTooManyRequests, "user.ErrTooManyRequests", true},
	{ErrBadEmail, "user.ErrBadEmail", true},
	{eventstore.ErrConcurrency, "eventstore.ErrConcurrency", false},
	{uow.ErrUnavailable, "uow.ErrUnavailable", false},
	{context.DeadlineExceeded, "context.DeadlineExceeded", false},
	{context.Canceled, "context.Canceled", false},
}

// refused reports whether err is one by which the domain refuses a
// command, rather than a failure to run it.
func refused(err error) bool {
	for _, k := range knownErrors {
		if k.refusal && errors.Is(err, k.err) {
			return true
		}
	}
	return false
}

// errorType is the error.type of err: the name of the first of
// [knownErrors] that it wraps, or else its type ([semconv.ErrorType]).
func errorType(err error) attribute.KeyValue {
	for _, k := range knownErrors {
		if errors.Is(err, k.err) {
			return semconv.ErrorTypeKey.String(k.name)
		}
	}
	return semconv.ErrorType(err)
}
