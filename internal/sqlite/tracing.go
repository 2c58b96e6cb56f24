package sqlite

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	sqlite "modernc.org/sqlite"
)

// tracerName names the tracer of the units of work: the package's import
// path.
const tracerName = "github.com/eventsourced/accounts/internal/sqlite"

// Events of the span of a unit of work.
const (
	// eventBegun marks the end of the wait for the write connection and
	// the write lock (BEGIN IMMEDIATE), or for a connection of the read
	// pool.
	eventBegun = "begun"
	// eventCommit marks the start of the COMMIT, which in WAL mode with
	// synchronous=FULL waits for the disk.
	eventCommit = "commit"
	// eventRollback marks a unit of work whose function failed; the span
	// of the command says why.
	eventRollback = "rollback"
)

// WithTracerProvider makes the DB trace its units of work with tp;
// without it, or with nil, otel.GetTracerProvider() traces them.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

// tracer returns the tracer of tp, or of the global provider when tp is nil.
func tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// unitSpan is the client span of one unit of work: database/sql has no
// hook for its statements, so the unit of work is what this backend
// traces. Its events split it into the wait to begin, the work and the
// commit. A nil unitSpan traces nothing.
type unitSpan struct{ span trace.Span }

// startUnit starts the span name of a unit of work, a child of the span
// in ctx, when ctx is in a trace: the units of work outside any, such as
// the relay's bookkeeping, would each be a trace of their own.
func (db *DB) startUnit(ctx context.Context, name string) (context.Context, *unitSpan) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	ctx, span := db.tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.DBSystemNameSQLite))
	return ctx, &unitSpan{span: span}
}

// event adds the event name to the span.
func (u *unitSpan) event(name string) {
	if u != nil {
		u.span.AddEvent(name)
	}
}

// fail marks the span failed at what ("begin failed", "commit failed")
// with err's SQLite result code, or its type; never its text.
func (u *unitSpan) fail(what string, err error) {
	if u == nil || err == nil {
		return
	}
	u.span.SetStatus(codes.Error, what)
	var e *sqlite.Error
	if errors.As(err, &e) {
		code := strconv.Itoa(e.Code())
		u.span.SetAttributes(semconv.DBResponseStatusCode(code), semconv.ErrorTypeKey.String(code))
		return
	}
	u.span.SetAttributes(semconv.ErrorType(err))
}

// end ends the span.
func (u *unitSpan) end() {
	if u != nil {
		u.span.End()
	}
}
