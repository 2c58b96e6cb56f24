package postgres_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// address is an argument of the traced statements that no span may hold.
const address = "ada.lovelace@example.com"

// tracedDB is a DB whose statement spans a recorder keeps, and the span
// of the test that the statements run under.
type tracedDB struct {
	db     *postgres.DB
	spans  *tracetest.SpanRecorder
	ctx    context.Context
	parent trace.Span
}

func setupTracedDB(t *testing.T) *tracedDB {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, parent := tp.Tracer("test").Start(t.Context(), "command")
	return &tracedDB{db: pgtest.New(t, postgres.WithTracerProvider(tp)), spans: rec, ctx: ctx, parent: parent}
}

// statements returns the ended spans of statements under the test's span.
func (d *tracedDB) statements() []sdktrace.ReadOnlySpan {
	var got []sdktrace.ReadOnlySpan
	for _, s := range d.spans.Ended() {
		if s.Parent().SpanID() == d.parent.SpanContext().SpanID() {
			got = append(got, s)
		}
	}
	return got
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// checkNoAddress fails t when a span's name, status, attribute or event
// holds address.
func checkNoAddress(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		texts := []string{s.Name(), s.Status().Description}
		for _, kv := range s.Attributes() {
			texts = append(texts, kv.Value.Emit())
		}
		for _, e := range s.Events() {
			texts = append(texts, e.Name)
			for _, kv := range e.Attributes {
				texts = append(texts, kv.Value.Emit())
			}
		}
		for _, text := range texts {
			if strings.Contains(text, "ada.lovelace") {
				t.Errorf("span %q holds the address: %s", s.Name(), text)
			}
		}
	}
}

// The statements of the main pool are client spans in the trace of their
// context, with their SQL and never their arguments, and of a failure the
// SQLSTATE alone; outside a trace, and on the relay's pool, they are not
// traced; with tracing off the pool has no tracer.
func TestStatementSpans(t *testing.T) {
	t.Parallel()

	t.Run("unit of work", func(t *testing.T) {
		t.Parallel()
		d := setupTracedDB(t)
		e, err := eventstore.NewEvent("test.traced", map[string]string{"email": address}, eventstore.Metadata{})
		if err != nil {
			t.Fatal(err)
		}
		err = d.db.Runner(nil).Do(d.ctx, func(ctx context.Context, tx uow.Tx) error {
			if _, err := d.db.Events().Load(ctx, tx, "traced-"+address, 0); err != nil {
				return err
			}
			_, err := d.db.Events().Append(ctx, tx, "traced-"+address, eventstore.Any, e)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		spans := d.statements()
		if len(spans) < 2 {
			t.Fatalf("%d statement spans under the unit of work's, want its statements and its commit", len(spans))
		}
		var sawBegin, sawCommit bool
		for _, s := range spans {
			a := attrs(s)
			if s.SpanKind() != trace.SpanKindClient || a["db.system.name"].AsString() != "postgresql" {
				t.Errorf("span %q: kind %s, db.system.name %q, want a PostgreSQL client span", s.Name(), s.SpanKind(), a["db.system.name"].Emit())
			}
			if got := s.InstrumentationScope().Name; got != "github.com/eventsourced/accounts/internal/postgres" {
				t.Errorf("span %q: tracer %q, want the package's import path", s.Name(), got)
			}
			text := a["db.query.text"].AsString()
			t.Logf("span %q: %s", s.Name(), text)
			if text == "" {
				t.Errorf("span %q has no db.query.text", s.Name())
			}
			sawBegin = sawBegin || strings.HasPrefix(strings.ToLower(text), "begin")
			sawCommit = sawCommit || strings.HasSuffix(strings.ToLower(text), "commit")
			if s.Status().Code != codes.Unset {
				t.Errorf("span %q: status %+v, want unset", s.Name(), s.Status())
			}
		}
		// The first statement went in one batch with the BEGIN.
		first := attrs(spans[0])
		if spans[0].Name() != "BEGIN; SELECT" || first["db.operation.name"].AsString() != "BATCH" || first["db.operation.batch.size"].AsInt64() != 2 {
			t.Errorf("the first span %q, %v; want the batch BEGIN; SELECT of 2", spans[0].Name(), first)
		}
		if !sawBegin || !sawCommit {
			t.Errorf("the statements' texts hold a BEGIN: %t, a COMMIT: %t; want both", sawBegin, sawCommit)
		}
		checkNoAddress(t, d.spans.Ended())
	})

	t.Run("failure keeps the SQLSTATE", func(t *testing.T) {
		t.Parallel()
		d := setupTracedDB(t)
		for _, c := range []struct {
			name  string
			first string // a statement before the failing one, "" for none
		}{
			// The first statement goes in one batch with the BEGIN.
			{"in a batch", ""},
			{"alone", "SELECT 1"},
		} {
			before := len(d.statements())
			err := d.db.Runner(nil).Do(d.ctx, func(ctx context.Context, tx uow.Tx) error {
				q, err := postgres.PgxTx(tx)
				if err != nil {
					return err
				}
				if c.first != "" {
					if _, err := q.Exec(ctx, c.first); err != nil {
						return err
					}
				}
				// PostgreSQL quotes the value it cannot read in its error.
				var n int
				return q.QueryRow(ctx, `SELECT $1::text::int`, address).Scan(&n)
			})
			if err == nil || !strings.Contains(err.Error(), "22P02") {
				t.Fatalf("%s: %v, want invalid_text_representation", c.name, err)
			}
			var failed []sdktrace.ReadOnlySpan
			for _, s := range d.statements()[before:] {
				if s.Status().Code == codes.Error {
					failed = append(failed, s)
				}
			}
			if len(failed) != 1 {
				t.Fatalf("%s: %d failed statement spans, want 1", c.name, len(failed))
			}
			s := failed[0]
			a := attrs(s)
			if a["db.response.status_code"].AsString() != "22P02" || a["error.type"].AsString() != "22P02" {
				t.Errorf("%s: db.response.status_code %q, error.type %q, want 22P02", c.name, a["db.response.status_code"].Emit(), a["error.type"].Emit())
			}
			if got := s.Status().Description; got != "SQLSTATE 22P02" {
				t.Errorf("%s: status %q, want the SQLSTATE alone", c.name, got)
			}
			if _, batch := a["db.operation.batch.size"]; batch != (c.first == "") {
				t.Errorf("%s: span %q is a batch: %t", c.name, s.Name(), batch)
			}
		}
		checkNoAddress(t, d.spans.Ended())
	})

	t.Run("outside a trace and on the relay's pool", func(t *testing.T) {
		t.Parallel()
		d := setupTracedDB(t)
		if _, err := d.db.Pool().Exec(context.Background(), `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		m, err := outbox.NewMessage("test.traced", map[string]string{"to": address}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := d.db.Runner(nil).Do(context.Background(), func(ctx context.Context, tx uow.Tx) error {
			return d.db.Outbox().Add(ctx, tx, m)
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.db.Outbox().Claim(d.ctx, time.Now().Add(time.Minute), time.Minute, 10); err != nil {
			t.Fatal(err)
		}
		if spans := d.spans.Ended(); len(spans) != 0 {
			t.Errorf("%d spans, the first %q; want none", len(spans), spans[0].Name())
		}
	})

	t.Run("tracing off", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t, postgres.WithTracerProvider(noop.NewTracerProvider()))
		if tr := db.Pool().Config().ConnConfig.Tracer; tr != nil {
			t.Errorf("the pool's tracer is a %T, want none", tr)
		}
	})

	t.Run("beside a tracer of the configuration", func(t *testing.T) {
		t.Parallel()
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		cfg, err := postgres.ParseConfig(pgtest.NewURL(t))
		if err != nil {
			t.Fatal(err)
		}
		var theirs countingTracer
		cfg.ConnConfig.Tracer = &theirs
		db, err := postgres.OpenConfig(t.Context(), cfg, postgres.WithTracerProvider(tp))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		ctx, parent := tp.Tracer("test").Start(t.Context(), "command")
		before := theirs.n.Load()
		if _, err := db.Pool().Exec(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		parent.End()
		if theirs.n.Load() == before {
			t.Error("the configuration's tracer saw no statement")
		}
		if n := len(rec.Ended()); n != 2 {
			t.Errorf("%d spans, want the statement's and its parent", n)
		}
	})
}

// countingTracer counts the statements it sees.
type countingTracer struct{ n atomic.Int64 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
