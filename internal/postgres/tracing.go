package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName names the tracer of the statements: the package's import path.
const tracerName = "github.com/eventsourced/accounts/internal/postgres"

// WithTracerProvider makes the DB trace the statements of its main pool
// with tp ([statementTracer]); without it, or with nil,
// otel.GetTracerProvider() traces them. With a [noop.TracerProvider],
// tracing off, the DB installs no tracer at all, and a statement costs
// nothing more than without tracing.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

// traceStatements sets the tracer of the statements of tp on cfg, beside
// the one cfg has, if any.
func traceStatements(cfg *pgx.ConnConfig, tp trace.TracerProvider) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if _, off := tp.(noop.TracerProvider); off {
		return
	}
	var t pgx.QueryTracer = statementTracer{tr: tp.Tracer(tracerName), server: []attribute.KeyValue{
		semconv.DBSystemNamePostgreSQL, semconv.DBNamespace(cfg.Database),
		semconv.ServerAddress(cfg.Host), semconv.ServerPort(int(cfg.Port)),
	}}
	if cfg.Tracer != nil {
		t = multitracer.New(cfg.Tracer, t)
	}
	cfg.Tracer = t
}

// statementTracer is the pgx tracer of the main pool: a client span per
// statement (Exec, Query, QueryRow) and per batch, which is how [pipeTx]
// sends a unit of work's BEGIN, held writes and COMMIT with the next
// statement. It starts a span only in a trace, as a child of the span in
// the statement's context (a command's, a projection batch's, an HTTP
// request's): the polls of the event log's subscribers, the migrations
// and the LISTEN connection run outside any, and a trace of one statement
// each would drown the others. The relay's pool has no tracer: a busy
// relay claims and settles many times a second, and its deliveries have
// spans of their own.
//
// A span records the statement's SQL (db.query.text), which this package
// writes with placeholders, and never its arguments, which hold hashes,
// sealed addresses and payloads. Of a failure it keeps the SQLSTATE
// (db.response.status_code and error.type), never the error's text, which
// can quote a value.
//
// A batch is one span: pgx reports when each statement of a batch has
// its result but not when it started, since all are sent at once. pgx
// may end a batch twice (once when SendBatch fails early, again when its
// results are closed), so a span ends once whatever pgx calls. A Query's
// span ends when its rows are closed, as pgx traces it.
type statementTracer struct {
	tr trace.Tracer
	// server are the attributes of every span: the system, the database
	// and the server of the pool's configuration, read once, since
	// [pgx.Conn.Config] copies it.
	server []attribute.KeyValue
}

var (
	_ pgx.QueryTracer = statementTracer{}
	_ pgx.BatchTracer = statementTracer{}
)

// statementKey keeps the [statementSpan] of a statement in the context
// that pgx passes from the start of a statement to its end.
type statementKey struct{}

// statementSpan is the span of one statement or batch.
type statementSpan struct {
	span          trace.Span
	failed, ended bool
}

func (t statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !inTrace(ctx) {
		return ctx
	}
	return t.startOne(ctx, data.SQL)
}

func (t statementTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if s := spanOf(ctx); s != nil {
		s.end(data.Err)
	}
}

func (t statementTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if !inTrace(ctx) {
		return ctx
	}
	queued := data.Batch.QueuedQueries
	if len(queued) == 1 {
		return t.startOne(ctx, queued[0].SQL)
	}
	texts, ops := make([]string, len(queued)), make([]string, 0, len(queued))
	for i, q := range queued {
		texts[i] = q.SQL
		if op := operation(q.SQL); len(ops) == 0 || ops[len(ops)-1] != op {
			ops = append(ops, op)
		}
	}
	name := "BATCH"
	if len(ops) == 1 {
		name += " " + ops[0]
	}
	// The summary, the span's name, lists the kinds of statement in
	// order, a run of alike ones once: "BEGIN; INSERT; COMMIT".
	summary := strings.Join(ops, "; ")
	return t.start(ctx, summary,
		semconv.DBQueryText(strings.Join(texts, "; ")), semconv.DBQuerySummary(summary),
		semconv.DBOperationName(name), semconv.DBOperationBatchSize(len(queued)))
}

func (t statementTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if s := spanOf(ctx); s != nil {
		s.fail(data.Err)
	}
}

func (t statementTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	if s := spanOf(ctx); s != nil {
		s.end(data.Err)
	}
}

// startOne starts the span of the one statement sql, named for its
// operation.
func (t statementTracer) startOne(ctx context.Context, sql string) context.Context {
	op := operation(sql)
	if op == "postgresql" {
		return t.start(ctx, op, semconv.DBQueryText(sql))
	}
	return t.start(ctx, op, semconv.DBQueryText(sql), semconv.DBOperationName(op))
}

// inTrace reports whether ctx is in a trace, where a statement is traced.
func inTrace(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsValid() }

// start starts the client span name of a statement and returns the
// context that carries it.
func (t statementTracer) start(ctx context.Context, name string, attrs ...attribute.KeyValue) context.Context {
	ctx, span := t.tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(t.server...), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, statementKey{}, &statementSpan{span: span})
}

// spanOf returns the span that [statementTracer.start] put in ctx, or nil.
func spanOf(ctx context.Context) *statementSpan {
	s, _ := ctx.Value(statementKey{}).(*statementSpan)
	return s
}

// fail marks the span failed with err, unless err is nil or the span
// failed already: a batch keeps the failure of its first statement that
// failed, which fails those after it.
func (s *statementSpan) fail(err error) {
	if err == nil || s.failed || errors.Is(err, pgx.ErrNoRows) {
		return
	}
	s.failed = true
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		s.span.SetStatus(codes.Error, "SQLSTATE "+pgErr.Code)
		s.span.SetAttributes(semconv.DBResponseStatusCode(pgErr.Code), semconv.ErrorTypeKey.String(pgErr.Code))
		return
	}
	s.span.SetStatus(codes.Error, "statement failed")
	s.span.SetAttributes(semconv.ErrorType(err))
}

// end ends the span, failed with err when err is not nil, once.
func (s *statementSpan) end(err error) {
	if s.ended {
		return
	}
	s.ended = true
	s.fail(err)
	s.span.End()
}

// operation returns the first word of sql in upper case, such as
// "SELECT", or "postgresql" when it starts with no word.
func operation(sql string) string {
	sql = strings.TrimLeft(sql, " \t\r\n(")
	end := strings.IndexFunc(sql, func(r rune) bool { return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') })
	if end < 0 {
		end = len(sql)
	}
	if end == 0 {
		return "postgresql"
	}
	return strings.ToUpper(sql[:end])
}
