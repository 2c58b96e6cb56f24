package relay_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/uow"
)

// traced is a relay fixture whose spans are recorded.
type traced struct {
	*fixture
	spans *tracetest.SpanRecorder
	tp    *sdktrace.TracerProvider
}

func newTraced(t *testing.T, cfg outbox.RelayConfig, opts ...relay.Option) *traced {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f := newFixtureWith(t, cfg, append([]relay.Option{relay.WithTracerProvider(tp)}, opts...)...)
	return &traced{fixture: f, spans: spans, tp: tp}
}

// request adds a message for topic "mail" in a unit of work run under the
// span of a request with ID req, as the HTTP server runs a command, and
// returns the message and the request's span context.
func (f *traced) request(t *testing.T, req string) (outbox.Message, trace.SpanContext) {
	t.Helper()
	ctx, span := f.tp.Tracer("test").Start(requestid.With(t.Context(), req), "POST /v1/sign-in-links")
	defer span.End()
	m, err := outbox.NewMessage("mail", map[string]string{"to": "ada@example.com"}, f.now)
	if err != nil {
		t.Fatal(err)
	}
	err = f.runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error { return f.store.Add(ctx, tx, m) })
	if err != nil {
		t.Fatal(err)
	}
	return m, span.SpanContext()
}

// deliveries returns the ended spans of the relay's deliveries, in the
// order they ended.
func (f *traced) deliveries(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	for _, s := range f.spans.Ended() {
		if s.InstrumentationScope().Name == "github.com/eventsourced/accounts/internal/outbox" {
			got = append(got, s)
		}
	}
	return got
}

// handlerSaw is what a handler found in its context.
type handlerSaw struct {
	mu    sync.Mutex
	spans []trace.SpanContext
	reqs  []string
}

func (h *handlerSaw) see(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.spans = append(h.spans, trace.SpanContextFromContext(ctx))
	h.reqs = append(h.reqs, requestid.From(ctx))
}

// checkDelivery checks the name, kind and attributes of a delivery's span.
func checkDelivery(t *testing.T, s sdktrace.ReadOnlySpan, m outbox.Message, attempt int, outcome string) {
	t.Helper()
	if s.Name() != "outbox deliver mail" || s.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("span %q of kind %s, want %q, consumer", s.Name(), s.SpanKind(), "outbox deliver mail")
	}
	want := map[attribute.Key]attribute.Value{
		"messaging.operation.type":   attribute.StringValue("process"),
		"messaging.destination.name": attribute.StringValue("mail"),
		"messaging.message.id":       attribute.StringValue(m.ID.String()),
		"outbox.attempt":             attribute.IntValue(attempt),
		"outbox.outcome":             attribute.StringValue(outcome),
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		got[kv.Key] = kv.Value
		if strings.Contains(kv.Value.Emit(), "@") {
			t.Errorf("span attribute %s = %q holds an address", kv.Key, kv.Value.Emit())
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span attribute %s = %q, want %q", k, got[k].Emit(), v.Emit())
		}
	}
}

// TestRelayTracing checks the relay's span of each delivery: where it sits
// among the traces, what it says, and what the handler's context carries.
func TestRelayTracing(t *testing.T) {
	t.Run("FirstAttemptIsAChildOfTheRequest", testTracingFirstAttempt)
	t.Run("RetryStartsANewTraceLinkedToTheRequest", testTracingRetry)
	t.Run("BuriedDeliverySaysSo", testTracingBuried)
	t.Run("MessageWithoutOriginStillDelivers", testTracingWithoutOrigin)
	t.Run("RunTracesAsDrainDoes", testTracingRun)
	t.Run("NoopProviderStartsNoSpanAndKeepsTheRequestID", testTracingOff)
}

// The first delivery joins the request's trace, as a child of the span
// that added the message, and the handler runs under the delivery's span
// with the request's ID.
func testTracingFirstAttempt(t *testing.T) {
	f := newTraced(t, outbox.RelayConfig{MaxAttempts: 3})
	var saw handlerSaw
	f.handle = func(ctx context.Context, _ outbox.Message) error { saw.see(ctx); return nil }
	m, origin := f.request(t, "req-first")
	if got := f.drain(t); got.Delivered != 1 {
		t.Fatalf("drain: %+v, want one delivered", got)
	}
	spans := f.deliveries(t)
	if len(spans) != 1 {
		t.Fatalf("%d delivery spans, want 1", len(spans))
	}
	s := spans[0]
	checkDelivery(t, s, m, 1, "delivered")
	if s.Parent().TraceID() != origin.TraceID() || s.Parent().SpanID() != origin.SpanID() || !s.Parent().IsRemote() {
		t.Errorf("delivery's parent %s/%s, want the request's span %s/%s, remote",
			s.Parent().TraceID(), s.Parent().SpanID(), origin.TraceID(), origin.SpanID())
	}
	if len(s.Links()) != 0 {
		t.Errorf("first delivery has links %v, want none", s.Links())
	}
	if len(saw.spans) != 1 || !saw.spans[0].Equal(s.SpanContext()) || saw.reqs[0] != "req-first" {
		t.Errorf("handler saw spans %v and request IDs %q, want the delivery's span %v and req-first", saw.spans, saw.reqs, s.SpanContext())
	}
}

// A delivery refused once is retried in a trace of its own, with a link
// to the request's span instead of a parent; the refused one says it
// failed, and the relay's line about the retry names the request.
func testTracingRetry(t *testing.T) {
	var logs bytes.Buffer
	f := newTraced(t, outbox.RelayConfig{MaxAttempts: 3},
		relay.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	failures := 1
	f.handle = func(context.Context, outbox.Message) error {
		if failures > 0 {
			failures--
			return errors.New("421 ada@example.com: try again later")
		}
		return nil
	}
	m, origin := f.request(t, "req-retried")
	if got := f.drain(t); got.Retried != 1 {
		t.Fatalf("first drain: %+v, want one retried", got)
	}
	f.now = f.now.Add(outbox.Backoff(1))
	if got := f.drain(t); got.Delivered != 1 {
		t.Fatalf("second drain: %+v, want one delivered", got)
	}
	spans := f.deliveries(t)
	if len(spans) != 2 {
		t.Fatalf("%d delivery spans, want 2", len(spans))
	}
	first, retry := spans[0], spans[1]
	checkDelivery(t, first, m, 1, "retried")
	if first.Parent().SpanID() != origin.SpanID() {
		t.Errorf("first attempt's parent %s, want the request's span %s", first.Parent().SpanID(), origin.SpanID())
	}
	if first.Status().Code != codes.Error || strings.Contains(first.Status().Description, "@") {
		t.Errorf("first attempt's status %+v, want an error that names no address", first.Status())
	}
	checkDelivery(t, retry, m, 2, "delivered")
	if retry.Parent().IsValid() || retry.SpanContext().TraceID() == origin.TraceID() {
		t.Errorf("retry: parent %v, trace %s; want a root span of a new trace, not %s",
			retry.Parent(), retry.SpanContext().TraceID(), origin.TraceID())
	}
	if links := retry.Links(); len(links) != 1 || links[0].SpanContext.TraceID() != origin.TraceID() ||
		links[0].SpanContext.SpanID() != origin.SpanID() {
		t.Errorf("retry's links %v, want one to the request's span %s/%s", links, origin.TraceID(), origin.SpanID())
	}
	line := ""
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "will retry") {
			line = l
		}
	}
	if !strings.Contains(line, "request_id=req-retried") {
		t.Errorf("the retry's log line %q names no request_id=req-retried; log:\n%s", line, logs.String())
	}
}

// A delivery whose failure buries its message ends with that outcome.
func testTracingBuried(t *testing.T) {
	f := newTraced(t, outbox.RelayConfig{MaxAttempts: 1})
	f.handle = func(context.Context, outbox.Message) error { return errors.New("451 4.3.0 try again later") }
	m, _ := f.request(t, "req-buried")
	if got := f.drain(t); got.Buried != 1 {
		t.Fatalf("drain: %+v, want one buried", got)
	}
	spans := f.deliveries(t)
	if len(spans) != 1 {
		t.Fatalf("%d delivery spans, want 1", len(spans))
	}
	checkDelivery(t, spans[0], m, 1, "buried")
}

// A message added outside any span and request (before origins were kept,
// or by a job of its own) is delivered under a root span, and its handler
// sees no request ID.
func testTracingWithoutOrigin(t *testing.T) {
	f := newTraced(t, outbox.RelayConfig{MaxAttempts: 3})
	var saw handlerSaw
	f.handle = func(ctx context.Context, _ outbox.Message) error { saw.see(ctx); return nil }
	m := f.add(t, "mail")
	if got := f.drain(t); got.Delivered != 1 {
		t.Fatalf("drain: %+v, want one delivered", got)
	}
	spans := f.deliveries(t)
	if len(spans) != 1 {
		t.Fatalf("%d delivery spans, want 1", len(spans))
	}
	checkDelivery(t, spans[0], m, 1, "delivered")
	if spans[0].Parent().IsValid() || len(spans[0].Links()) != 0 {
		t.Errorf("delivery without origin: parent %v, links %v; want a root span", spans[0].Parent(), spans[0].Links())
	}
	if len(saw.reqs) != 1 || saw.reqs[0] != "" || !saw.spans[0].Equal(spans[0].SpanContext()) {
		t.Errorf("handler saw request IDs %q and spans %v, want none and the delivery's span", saw.reqs, saw.spans)
	}
}

// Run, through its router and subscriber, makes the same span as Drain
// and ends it once the delivery is settled.
func testTracingRun(t *testing.T) {
	f := newTraced(t, outbox.RelayConfig{MaxAttempts: 3})
	delivered := make(chan struct{})
	var saw handlerSaw
	f.handle = func(ctx context.Context, _ outbox.Message) error {
		saw.see(ctx)
		close(delivered)
		return nil
	}
	m, origin := f.request(t, "req-run")
	cancel, done := runRelay(t, f.relay)
	<-delivered
	stopRelay(t, cancel, done)
	spans := f.deliveries(t)
	if len(spans) != 1 {
		t.Fatalf("%d delivery spans, want 1", len(spans))
	}
	checkDelivery(t, spans[0], m, 1, "delivered")
	if spans[0].Parent().SpanID() != origin.SpanID() {
		t.Errorf("delivery's parent %s, want the request's span %s", spans[0].Parent().SpanID(), origin.SpanID())
	}
	if !saw.spans[0].Equal(spans[0].SpanContext()) || saw.reqs[0] != "req-run" {
		t.Errorf("handler saw span %v and request ID %q, want the delivery's and req-run", saw.spans[0], saw.reqs[0])
	}
}

// With a no-op provider, as when tracing is off, the relay starts no span,
// leaves alone a span of the caller's that its context carries, and the
// handler still learns the request that added the message.
func testTracingOff(t *testing.T) {
	f := newTraced(t, outbox.RelayConfig{MaxAttempts: 3}, relay.WithTracerProvider(tracenoop.NewTracerProvider()))
	var saw handlerSaw
	f.handle = func(ctx context.Context, _ outbox.Message) error { saw.see(ctx); return errors.New("refused") }
	f.request(t, "req-off")
	ctx, caller := f.tp.Tracer("test").Start(t.Context(), "caller")
	got, err := f.relay.Drain(ctx)
	if err != nil || got.Retried != 1 {
		t.Fatalf("drain: %+v, %v; want one retried", got, err)
	}
	if spans := f.deliveries(t); len(spans) != 0 {
		t.Errorf("%d delivery spans with a no-op provider, want none", len(spans))
	}
	for _, s := range f.spans.Ended() {
		if s.Name() == "caller" {
			t.Errorf("the relay ended its caller's span, status %+v", s.Status())
		}
	}
	caller.End()
	if len(saw.reqs) != 1 || saw.reqs[0] != "req-off" {
		t.Errorf("handler saw request IDs %q, want req-off", saw.reqs)
	}
}
