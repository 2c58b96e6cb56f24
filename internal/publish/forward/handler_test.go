package forward_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/publish/forward"
	"github.com/eventsourced/accounts/internal/publish/webhook"
	"github.com/eventsourced/accounts/schemas"
)

// recorder is a message.Publisher that keeps what it is given.
type recorder struct{ msgs []*message.Message }

func (r *recorder) Publish(_ string, msgs ...*message.Message) error {
	r.msgs = append(r.msgs, msgs...)
	return nil
}

func (r *recorder) Close() error { return nil }

// signedIn returns the outbox message of a user.signed_in event for the
// broker.
func signedIn(t *testing.T) outbox.Message {
	t.Helper()
	ev := publish.Events{Source: "https://accounts.example.com", Destinations: []publish.Destination{publish.Broker}}
	const user = "0190a3b1-0000-7000-8000-0000000000aa"
	msgs, err := ev.Messages("user.signed_in", user, map[string]any{"user_id": user, "version": 2}, time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return msgs[0]
}

// TestHandlerTraceContext holds the published CloudEvent to the
// distributed tracing extension: the span context of the delivery when
// there is one, nothing otherwise.
func TestHandlerTraceContext(t *testing.T) {
	t.Parallel()
	state, err := trace.ParseTraceState("vendor=a1,other=b2")
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name string
		// ctx returns the delivery's context.
		ctx        func() context.Context
		traced     bool
		traceState string
	}{
		{name: "outside a trace adds nothing", ctx: t.Context},
		{name: "a span adds traceparent", traced: true, ctx: func() context.Context {
			ctx, span := tp.Tracer("test").Start(t.Context(), "delivery")
			t.Cleanup(func() { span.End() })
			return ctx
		}},
		{name: "a trace state adds tracestate", traced: true, traceState: "vendor=a1,other=b2", ctx: func() context.Context {
			parent := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{0x4b, 0xf9, 1}, SpanID: trace.SpanID{0x00, 0xf0, 1},
				TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
			})
			ctx, span := tp.Tracer("test").Start(trace.ContextWithRemoteSpanContext(t.Context(), parent), "delivery")
			t.Cleanup(func() { span.End() })
			return ctx
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := signedIn(t)
			var pub recorder
			ctx := tc.ctx()
			if err := forward.Handler(&pub, forward.Subject("accounts."))(ctx, m); err != nil {
				t.Fatal(err)
			}
			if len(pub.msgs) != 1 {
				t.Fatalf("%d messages published, want 1", len(pub.msgs))
			}
			got := pub.msgs[0]
			if err := schemas.Check(got.Payload); err != nil {
				t.Errorf("the published event does not match its schema: %v\n%s", err, got.Payload)
			}
			if got.Context() != ctx {
				t.Error("the Watermill message does not carry the delivery's context")
			}
			if !tc.traced {
				if !bytes.Equal(got.Payload, m.Payload) {
					t.Errorf("payload %s, want the stored %s", got.Payload, m.Payload)
				}
				return
			}
			var ce, stored publish.CloudEvent
			if err := json.Unmarshal(got.Payload, &ce); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(m.Payload, &stored); err != nil {
				t.Fatal(err)
			}
			sc := trace.SpanContextFromContext(ctx)
			want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
			if ce.TraceParent != want || ce.TraceState != tc.traceState {
				t.Errorf("traceparent %q, tracestate %q; want %q, %q", ce.TraceParent, ce.TraceState, want, tc.traceState)
			}
			ce.TraceParent, ce.TraceState = "", ""
			if a, b := mustJSON(t, ce), mustJSON(t, stored); a != b {
				t.Errorf("the rest of the event changed:\n%s\nwant\n%s", a, b)
			}
		})
	}
}

// A publish to a destination that cannot be reached at all fails with
// outbox.ErrUnreachable, which opens the topic's breaker at once; one
// that the destination answers with a refusal does not.
func TestHandlerMarksADestinationThatCannotBeReached(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/events"
	_ = l.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	t.Cleanup(refusing.Close)
	for _, tc := range []struct {
		name, url   string
		unreachable bool
	}{{"ConnectionRefused", closed, true}, {"Refused", refusing.URL, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pub, err := webhook.New(webhook.Config{URL: tc.url, Secret: "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pub.Close() })
			err = forward.Handler(pub, func(typ string) string { return typ })(t.Context(), signedIn(t))
			if err == nil {
				t.Fatal("the publish succeeded")
			}
			if got := errors.Is(err, outbox.ErrUnreachable); got != tc.unreachable {
				t.Errorf("errors.Is(%v, outbox.ErrUnreachable) = %t, want %t", err, got, tc.unreachable)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
