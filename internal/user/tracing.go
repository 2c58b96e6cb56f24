package user

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/aggregate"
)

// instrumentation names the tracer and the meter of the commands: the
// package's import path.
const instrumentation = "github.com/eventsourced/accounts/internal/user"

// Each command and query of a [Service] is a span named after it, such as
// "user.SignIn", with the attributes user.command.tries, and an event for
// each lost race ([aggregate.Commands]). A span names no stream: the
// sign-in stream of an address is "signin-HASH", a keyed hash of the
// address's mailbox ([signInStream]), and a hash of an address is still
// personal data. It would tie together every trace of one person, stay in
// the trace store after an erasure, and answer a guess at the address by
// anyone who holds the key.

// refusals are the errors by which the domain refuses a command, rather
// than fails to run it, as the commands' spans and metrics name them.
var refusals = []aggregate.Refusal{
	{Err: ErrInvalidCode, Name: "user.ErrInvalidCode"},
	{Err: ErrUnauthenticated, Name: "user.ErrUnauthenticated"},
	{Err: ErrEmailTaken, Name: "user.ErrEmailTaken"},
	{Err: ErrTooManyRequests, Name: "user.ErrTooManyRequests"},
	{Err: ErrBadEmail, Name: "user.ErrBadEmail"},
}

// WithTracerProvider makes the span of each command and query with tp;
// without it, or with nil, otel.GetTracerProvider() makes them.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *Service) { s.tp = tp }
}

// WithMeterProvider records the duration and outcome of each command and
// query with mp (user.command.duration); without it, or with nil,
// otel.GetMeterProvider() records them.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(s *Service) { s.mp = mp }
}
