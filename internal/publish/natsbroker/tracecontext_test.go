package natsbroker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/publish/forward"
	"github.com/eventsourced/accounts/internal/publish/natsbroker"
	"github.com/eventsourced/accounts/internal/publish/natsbroker/natstest"
)

// TestPublishTraceContext holds a publish through [forward.Handler] to the
// trace of the span in its context: one producer span, a child of it, whose
// W3C trace context the stored message carries as headers, and the
// CloudEvent as its tracing extension; a failed publish's span keeps the
// error's type, not its text; outside a trace, neither span nor headers.
func TestPublishTraceContext(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p, err := natsbroker.New(natsbroker.Config{URLs: srv.URL, Stream: "ACCOUNTS", Subjects: []string{"accounts.>"}, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	handle := forward.Handler(p, forward.Subject("accounts."))
	events := publish.Events{Source: "https://accounts.example.com", Destinations: []publish.Destination{publish.Broker}}

	// send hands a user.signed_in to the handler under ctx and returns the
	// stored message's headers and event, and the event's ID.
	var seq uint64
	send := func(t *testing.T, ctx context.Context) (map[string]string, publish.CloudEvent, string) {
		t.Helper()
		const user = "0190a3b1-0000-7000-8000-0000000000aa"
		msgs, err := events.Messages("user.signed_in", user, map[string]any{"user_id": user, "version": 2}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := handle(ctx, msgs[0]); err != nil {
			t.Fatal(err)
		}
		seq++
		raw, err := streamOf(t, srv).GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		var ce publish.CloudEvent
		if err := json.Unmarshal(raw.Data, &ce); err != nil {
			t.Fatal(err)
		}
		return map[string]string{
			"traceparent": raw.Header.Get("traceparent"),
			"tracestate":  raw.Header.Get("tracestate"),
		}, ce, msgs[0].ID.String()
	}

	t.Run("a span in ctx", func(t *testing.T) {
		state, err := trace.ParseTraceState("vendor=a1")
		if err != nil {
			t.Fatal(err)
		}
		ctx := trace.ContextWithRemoteSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{0x4b, 0xf9, 2}, SpanID: trace.SpanID{0x00, 0xf0, 2},
			TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
		}))
		ctx, delivery := tp.Tracer("test").Start(ctx, "delivery")
		headers, ce, id := send(t, ctx)
		delivery.End()

		sc := delivery.SpanContext()
		var span sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Parent().SpanID() == sc.SpanID() {
				span = s
			}
		}
		if span == nil {
			t.Fatal("no span of the publish is a child of the span in ctx")
		}
		if span.SpanKind() != trace.SpanKindProducer || span.Name() != "send accounts.user.signed_in" {
			t.Errorf("span %q of kind %s, want a producer span named send accounts.user.signed_in", span.Name(), span.SpanKind())
		}
		want := map[attribute.Key]string{
			"messaging.system":           "nats",
			"messaging.destination.name": "accounts.user.signed_in",
			"messaging.message.id":       id,
			"messaging.operation.type":   "send",
		}
		for _, kv := range span.Attributes() {
			if w, ok := want[kv.Key]; ok {
				if kv.Value.AsString() != w {
					t.Errorf("attribute %s = %q, want %q", kv.Key, kv.Value.AsString(), w)
				}
				delete(want, kv.Key)
			}
		}
		if len(want) > 0 {
			t.Errorf("span lacks the attributes %v", want)
		}
		traceID := sc.TraceID().String()
		if got, want := headers["traceparent"], "00-"+traceID+"-"+span.SpanContext().SpanID().String()+"-01"; got != want {
			t.Errorf("header traceparent %q, want the publish span's %q", got, want)
		}
		if headers["tracestate"] != "vendor=a1" || ce.TraceState != "vendor=a1" {
			t.Errorf("tracestate: header %q, event %q; want vendor=a1", headers["tracestate"], ce.TraceState)
		}
		if want := "00-" + traceID + "-" + sc.SpanID().String() + "-01"; ce.TraceParent != want {
			t.Errorf("CloudEvent traceparent %q, want the delivery's %q", ce.TraceParent, want)
		}
	})
	t.Run("a failed publish", func(t *testing.T) {
		// No stream takes the subject: JetStream does not answer.
		ctx, delivery := tp.Tracer("test").Start(t.Context(), "delivery")
		m := message.NewMessage("0190a3b1-0000-7000-8000-0000000000ff", []byte("{}"))
		m.SetContext(ctx)
		err := p.Publish("elsewhere.user.signed_in", m)
		delivery.End()
		if err == nil {
			t.Fatal("a publish to a subject of no stream succeeded")
		}
		var span sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Parent().SpanID() == delivery.SpanContext().SpanID() {
				span = s
			}
		}
		if span == nil {
			t.Fatal("no span of the publish is a child of the span in ctx")
		}
		// The error's type is kept, its text nowhere.
		if span.Status().Code != codes.Error || span.Status().Description != "publish failed" {
			t.Errorf("span status %v, want an error described as publish failed", span.Status())
		}
		if len(span.Events()) != 0 {
			t.Errorf("span events %v, want none", span.Events())
		}
		// The innermost error is the server's or the client's own words,
		// which the publisher's wrapping only adds to.
		inner := err
		for u := errors.Unwrap(inner); u != nil; u = errors.Unwrap(inner) {
			inner = u
		}
		var errType string
		for _, kv := range span.Attributes() {
			if kv.Key == "error.type" {
				errType = kv.Value.AsString()
			}
			if strings.Contains(kv.Value.Emit(), inner.Error()) {
				t.Errorf("attribute %s holds the error's text: %s", kv.Key, kv.Value.Emit())
			}
		}
		if errType == "" {
			t.Error("span lacks error.type")
		}
	})
	t.Run("outside a trace", func(t *testing.T) {
		before := len(rec.Ended())
		headers, ce, _ := send(t, t.Context())
		if headers["traceparent"] != "" || headers["tracestate"] != "" || ce.TraceParent != "" || ce.TraceState != "" {
			t.Errorf("headers %v, event traceparent %q tracestate %q; want none", headers, ce.TraceParent, ce.TraceState)
		}
		if n := len(rec.Ended()) - before; n != 0 {
			t.Errorf("%d spans ended for a publish outside a trace, want 0", n)
		}
	})
}
