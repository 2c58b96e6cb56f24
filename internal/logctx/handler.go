package logctx

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/requestid"
)

// The attribute keys a [Handler] adds.
const (
	KeyRequestID = "request_id"
	KeyTraceID   = "trace_id"
	KeySpanID    = "span_id"
)

// Handler is a [slog.Handler] that adds the context's request ID and span
// context to each record before next handles it. Under a group
// (Logger.WithGroup) the attributes land in that group, as any attribute
// added to the record there would.
type Handler struct {
	next slog.Handler
}

var _ slog.Handler = Handler{}

// New returns a Handler that hands the records on to next.
func New(next slog.Handler) Handler {
	return Handler{next: next}
}

// Enabled reports whether next handles records at level.
func (h Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle adds request_id, trace_id and span_id, those that ctx holds, to r
// and hands it to next.
func (h Handler) Handle(ctx context.Context, r slog.Record) error {
	id := requestid.From(ctx)
	sc := trace.SpanContextFromContext(ctx)
	if id == "" && !sc.IsValid() {
		return h.next.Handle(ctx, r)
	}
	// A record may be shared with other handlers; one to change is a clone.
	r = r.Clone()
	if id != "" {
		r.AddAttrs(slog.String(KeyRequestID, id))
	}
	if sc.IsValid() {
		r.AddAttrs(slog.String(KeyTraceID, sc.TraceID().String()), slog.String(KeySpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns a Handler over next.WithAttrs(attrs).
func (h Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return Handler{next: h.next.WithAttrs(attrs)}
}

// WithGroup returns a Handler over next.WithGroup(name).
func (h Handler) WithGroup(name string) slog.Handler {
	return Handler{next: h.next.WithGroup(name)}
}
