package aggregate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/uow"
)

// MaxTries bounds how often [Commands.Do] runs a command that keeps losing
// races with concurrent ones.
const MaxTries = 8

// Commands runs the commands and queries of one domain. Each command is
// one unit of work, run again on fresh state when it loses a race with a
// concurrent one ([eventstore.ErrConcurrency]), and one span named after
// it, with the number of tries and an event for each lost race; its
// duration and outcome (ok, refused, failed) go to the histogram
// DOMAIN.command.duration. Every unit of work runs under the context that
// Within gives it (the keys of personal data its unit of work reads), and
// under the command's name, which the metadata of the events it makes
// carry ([Metadata]).
//
// A span names no stream and keeps no error's text: a stream's name can
// be a hash of a person's address, and an error's text can quote one. Of
// an error it keeps the name of the refusal or the sentinel it wraps, or
// its type.
type Commands struct {
	runner   uow.Runner
	within   func(context.Context, uow.Tx) context.Context
	refusals []Refusal
	tracer   trace.Tracer
	duration metric.Float64Histogram
	// The attributes and events of the spans, named after the domain.
	attrTries, attrTry, attrDone attribute.Key
}

// Refusal is an error by which a domain refuses a command, rather than
// fails to run it, with the name its spans give it.
type Refusal struct {
	Err  error
	Name string
}

// CommandsConfig configures [NewCommands].
type CommandsConfig struct {
	// Domain prefixes the spans' attributes and the metric, such as
	// "user" for user.command.tries.
	Domain string
	// Instrumentation names the tracer and the meter: the import path of
	// the domain's package.
	Instrumentation string
	Runner          uow.Runner
	// Refusals are the domain's refusals, checked with errors.Is.
	Refusals []Refusal
	// Within returns the context each unit of work runs its function
	// under; nil leaves the context as it is.
	Within func(ctx context.Context, tx uow.Tx) context.Context
	// TracerProvider and MeterProvider default to OpenTelemetry's global
	// ones.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// The events of a command's span.
const (
	// EventLostRace marks a try that lost a race and is run again.
	EventLostRace = "lost race"
	// EventConditionFailed marks a try that appended on a presumption
	// about its stream and failed ([Commands.DoPresuming]).
	EventConditionFailed = "condition failed"
)

// NewCommands returns the runner of a domain's commands.
func NewCommands(c CommandsConfig) (*Commands, error) {
	if c.Runner == nil || c.Domain == "" || c.Instrumentation == "" {
		return nil, errors.New("aggregate: commands need a runner, a domain and an instrumentation name")
	}
	tp, mp := c.TracerProvider, c.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	duration, err := mp.Meter(c.Instrumentation).Float64Histogram(c.Domain+".command.duration",
		metric.WithUnit("s"), metric.WithDescription("How long a command or query took, tries included, by outcome: ok, refused or failed."))
	if err != nil {
		return nil, fmt.Errorf("aggregate: command metrics: %w", err)
	}
	within := c.Within
	if within == nil {
		within = func(ctx context.Context, _ uow.Tx) context.Context { return ctx }
	}
	return &Commands{
		runner: c.Runner, within: within, refusals: c.Refusals,
		tracer: tp.Tracer(c.Instrumentation), duration: duration,
		attrTries: attribute.Key(c.Domain + ".command.tries"),
		attrTry:   attribute.Key(c.Domain + ".command.try"),
		attrDone:  attribute.Key(c.Domain + ".job.done"),
	}, nil
}

// Do runs fn, the command name, in a unit of work, and runs it again, on
// fresh state, when it lost a race with a concurrent command, after a
// short random pause that grows with each try so that the racers spread
// out, up to [MaxTries] in all.
func (c *Commands) Do(ctx context.Context, name string, fn func(ctx context.Context, tx uow.Tx) error) error {
	ctx, span, done := c.start(ctx, name)
	defer endOnPanic(span)
	tries, err := c.tries(ctx, span, 0, fn)
	span.SetAttributes(c.attrTries.Int(tries))
	done(err)
	return err
}

// DoPresuming runs the command name as [Commands.Do] does, but tries
// first presumed, a unit of work that decides without loading its
// stream, on a presumption about the stream's recent events, and appends
// under that condition ([eventstore.Store.AppendLaterIf]). It saves a
// round trip to the database when the presumption holds; when it does
// not, the append fails with ErrConcurrency and fn, which loads the
// stream, runs as Do runs it, at once, the span marking the failed
// presumption.
func (c *Commands) DoPresuming(ctx context.Context, name string, presumed, fn func(ctx context.Context, tx uow.Tx) error) error {
	ctx, span, done := c.start(ctx, name)
	defer endOnPanic(span)
	err := c.runner.Do(ctx, c.wrap(presumed))
	tries := 1
	if errors.Is(err, eventstore.ErrConcurrency) {
		span.AddEvent(EventConditionFailed)
		tries, err = c.tries(ctx, span, 1, fn)
	}
	span.SetAttributes(c.attrTries.Int(tries))
	done(err)
	return err
}

// tries runs fn as [Commands.Do] describes, for a command that has run
// before times already, and returns how often it ran in all.
func (c *Commands) tries(ctx context.Context, span trace.Span, before int, fn func(ctx context.Context, tx uow.Tx) error) (int, error) {
	var err error
	for try := range MaxTries {
		if try > 0 {
			c.lostRace(span, before+try)
			pause := time.Duration(rand.Int64N(int64(time.Millisecond) << try))
			select {
			case <-ctx.Done():
				return before + try, ctx.Err()
			case <-time.After(pause):
			}
		}
		err = c.runner.Do(ctx, c.wrap(fn))
		if !errors.Is(err, eventstore.ErrConcurrency) {
			return before + try + 1, err
		}
	}
	c.lostRace(span, before+MaxTries)
	return before + MaxTries, fmt.Errorf("aggregate: gave up after %d concurrent changes: %w", MaxTries, err)
}

// Read runs fn, the query name, in a read-only unit of work, as one span
// named name.
func (c *Commands) Read(ctx context.Context, name string, fn func(ctx context.Context, tx uow.Tx) error) error {
	ctx, span, done := c.start(ctx, name)
	defer endOnPanic(span)
	err := c.runner.Read(ctx, c.wrap(fn))
	done(err)
	return err
}

// Job runs fn, a job of many units of work such as a sweep, as one span
// named name, so that its units of work are one trace and not one each,
// with the number fn returns of what it deleted or forgot.
func (c *Commands) Job(ctx context.Context, name string, fn func(ctx context.Context) (int64, error)) (int64, error) {
	ctx, span, done := c.start(ctx, name)
	defer endOnPanic(span)
	n, err := fn(ctx)
	span.SetAttributes(c.attrDone.Int64(n))
	done(err)
	return n, err
}

// wrap returns fn run under the context that the configuration's Within
// gives its unit of work.
func (c *Commands) wrap(fn func(ctx context.Context, tx uow.Tx) error) func(ctx context.Context, tx uow.Tx) error {
	return func(ctx context.Context, tx uow.Tx) error { return fn(c.within(ctx, tx), tx) }
}

// start starts the span of the command or query name, a child of the span
// in ctx, and returns the function that ends it with its outcome.
func (c *Commands) start(ctx context.Context, name string) (context.Context, trace.Span, func(error)) {
	began := time.Now()
	ctx, span := c.tracer.Start(withCommand(ctx, name), name, trace.WithSpanKind(trace.SpanKindInternal))
	return ctx, span, func(err error) {
		outcome := "ok"
		if err != nil {
			outcome = "failed"
			if c.refused(err) {
				outcome = "refused"
			}
			span.SetStatus(codes.Error, "command "+outcome)
			span.SetAttributes(c.errorType(err))
		}
		span.End()
		c.duration.Record(context.WithoutCancel(ctx), time.Since(began).Seconds(), metric.WithAttributes(
			attribute.String("command", name), attribute.String("outcome", outcome)))
	}
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
func (c *Commands) lostRace(span trace.Span, try int) {
	span.AddEvent(EventLostRace, trace.WithAttributes(c.attrTry.Int(try)))
}

// knownErrors are the sentinels of the layer that a span names by their
// own name, which says more than the type of a wrapped sentinel
// ("*fmt.wrapError").
var knownErrors = []Refusal{
	{eventstore.ErrConcurrency, "eventstore.ErrConcurrency"},
	{uow.ErrUnavailable, "uow.ErrUnavailable"},
	{context.DeadlineExceeded, "context.DeadlineExceeded"},
	{context.Canceled, "context.Canceled"},
}

// refused reports whether err is one of the domain's refusals.
func (c *Commands) refused(err error) bool {
	for _, r := range c.refusals {
		if errors.Is(err, r.Err) {
			return true
		}
	}
	return false
}

// errorType is the error.type of err: the name of the first refusal, then
// of [knownErrors], that it wraps, or else its type ([semconv.ErrorType]).
func (c *Commands) errorType(err error) attribute.KeyValue {
	for _, known := range [][]Refusal{c.refusals, knownErrors} {
		for _, k := range known {
			if errors.Is(err, k.Err) {
				return semconv.ErrorTypeKey.String(k.Name)
			}
		}
	}
	return semconv.ErrorType(err)
}

// commandKey keys the name of the command a context runs.
type commandKey struct{}

// withCommand returns ctx running the command name.
func withCommand(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, commandKey{}, name)
}

// CommandOf returns the name of the command ctx runs, "" outside one.
func CommandOf(ctx context.Context) string {
	name, _ := ctx.Value(commandKey{}).(string)
	return name
}

// Metadata returns the metadata of an event made under ctx: the request
// that caused it as its correlation ([requestid.From], which the origin
// of the outbox's messages of the same unit of work names too), and the
// command that appends it as its causation ([CommandOf]).
func Metadata(ctx context.Context) eventstore.Metadata {
	return eventstore.Metadata{CorrelationID: requestid.From(ctx), CausationID: CommandOf(ctx)}
}
