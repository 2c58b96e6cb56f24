package webhook_test

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/publish/webhook"
)

// TestPublishTraceContext holds a request to the trace of the span in its
// message's context: a client span, a child of it, whose W3C trace context
// the request carries in its traceparent header; outside a trace, neither.
func TestPublishTraceContext(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name   string
		client bool
	}{{"own client", false}, {"given client", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t, receiverConfig{})
			cfg := webhook.Config{URL: rcv.URL, TracerProvider: tp}
			if tc.client {
				cfg.Client = rcv.Client()
			}
			p := newPublisher(t, cfg)

			ctx, delivery := tp.Tracer("test").Start(t.Context(), "delivery")
			traced := message.NewMessage("evt-traced", []byte(`{}`))
			traced.SetContext(ctx)
			if err := p.Publish("t", traced); err != nil {
				t.Fatal(err)
			}
			delivery.End()
			d := rcv.next(t)
			var span sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.Parent().SpanID() == delivery.SpanContext().SpanID() {
					span = s
				}
			}
			if span == nil {
				t.Fatal("no span of the request is a child of the span in ctx")
			}
			if span.SpanKind() != trace.SpanKindClient {
				t.Errorf("span %q of kind %s, want a client span", span.Name(), span.SpanKind())
			}
			want := "00-" + delivery.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
			if got := d.header.Get("traceparent"); got != want {
				t.Errorf("traceparent %q, want the request span's %q", got, want)
			}
			if d.verifyErr != nil {
				t.Errorf("the receiver's Verify: %v", d.verifyErr)
			}

			before := len(rec.Ended())
			if err := p.Publish("t", message.NewMessage("evt-untraced", []byte(`{}`))); err != nil {
				t.Fatal(err)
			}
			if got := rcv.next(t).header.Get("traceparent"); got != "" {
				t.Errorf("a request outside a trace has traceparent %q", got)
			}
			for _, s := range rec.Ended()[before:] {
				if s.SpanKind() == trace.SpanKindClient && s.Parent().TraceID() == (trace.TraceID{}) {
					t.Errorf("a request outside a trace made span %q", s.Name())
				}
			}
		})
	}
}
