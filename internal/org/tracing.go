package org

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/aggregate"
	"github.com/eventsourced/accounts/internal/user"
)

// instrumentation names the tracer and the meter of the commands: the
// package's import path.
const instrumentation = "github.com/eventsourced/accounts/internal/org"

// Each command and query of a [Service] is a span named after it, such as
// "org.Invite", with the attribute org.command.tries and an event for
// each lost race ([aggregate.Commands]); a span names no stream and no
// address.

// refusals are the errors by which the domain refuses a command, rather
// than fails to run it, as the commands' spans and metrics name them.
var refusals = []aggregate.Refusal{
	{Err: ErrInvalidName, Name: "org.ErrInvalidName"},
	{Err: ErrInvalidRole, Name: "org.ErrInvalidRole"},
	{Err: ErrNotFound, Name: "org.ErrNotFound"},
	{Err: ErrNotOwner, Name: "org.ErrNotOwner"},
	{Err: ErrAlreadyMember, Name: "org.ErrAlreadyMember"},
	{Err: ErrLastOwner, Name: "org.ErrLastOwner"},
	{Err: ErrTooManyOrganizations, Name: "org.ErrTooManyOrganizations"},
	{Err: ErrFull, Name: "org.ErrFull"},
	{Err: ErrInvalidCode, Name: "org.ErrInvalidCode"},
	{Err: ErrWrongAddress, Name: "org.ErrWrongAddress"},
	{Err: ErrTooManyInvitations, Name: "org.ErrTooManyInvitations"},
	{Err: user.ErrUnauthenticated, Name: "user.ErrUnauthenticated"},
	{Err: user.ErrBadEmail, Name: "user.ErrBadEmail"},
}

// WithTracerProvider makes the span of each command and query with tp;
// without it, or with nil, otel.GetTracerProvider() makes them.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *Service) { s.tp = tp }
}

// WithMeterProvider records the duration and outcome of each command and
// query with mp (org.command.duration); without it, or with nil,
// otel.GetMeterProvider() records them.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(s *Service) { s.mp = mp }
}
