package kafkabroker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventsourced/accounts/internal/publish/kafkabroker"
)

// TestPublishTraceContext holds a record to the trace of the span in its
// message's context: a producer span, a child of it, that ends with the
// record's outcome, and whose W3C trace context the record carries as
// headers; outside a trace, neither.
func TestPublishTraceContext(t *testing.T) {
	t.Parallel()
	t.Run("a record in a trace carries its span's context", testTracedRecordCarriesItsSpansContext)
	t.Run("a refused record's span has the error", testRefusedRecordsSpanHasTheError)
}

func testTracedRecordCarriesItsSpansContext(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t, kfake.SeedTopics(1, topic))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	pub, err := kafkabroker.New(kafkabroker.Config{Brokers: cluster.ListenAddrs(), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	ctx := testContext(t, 30*time.Second)

	state, err := trace.ParseTraceState("vendor=a1")
	if err != nil {
		t.Fatal(err)
	}
	parent := trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 3}, SpanID: trace.SpanID{0x00, 0xf0, 3},
		TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
	}))
	deliveryCtx, delivery := tp.Tracer("test").Start(parent, "delivery")
	traced := newMessage(deliveryCtx, "account-1", []byte("traced"))
	traced.Metadata.Set("traceparent", "00-spoofed")
	untraced := newMessage(ctx, "account-2", []byte("untraced"))
	untraced.Metadata.Set("traceparent", "00-spoofed")
	if err := pub.Publish(topic, traced, untraced); err != nil {
		t.Fatal(err)
	}
	delivery.End()

	var span sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() == delivery.SpanContext().SpanID() {
			if span != nil {
				t.Fatal("two spans of the publish, want one per record in a trace")
			}
			span = s
		}
	}
	if n := len(rec.Ended()); n != 2 {
		t.Errorf("%d spans ended, want the delivery's and one of the traced record", n)
	}
	if span == nil {
		t.Fatal("no span of the publish is a child of the span in ctx")
	}
	if span.SpanKind() != trace.SpanKindProducer || span.Name() != "send "+topic {
		t.Errorf("span %q of kind %s, want a producer span named send %s", span.Name(), span.SpanKind(), topic)
	}
	checkAttributes(t, span, map[attribute.Key]string{
		"messaging.system":           "kafka",
		"messaging.destination.name": topic,
		"messaging.message.id":       traced.UUID,
		"messaging.operation.type":   "send",
	})

	recs := consume(ctx, t, cluster.ListenAddrs(), hasIDs([]*message.Message{traced, untraced}))
	want := map[string]map[string]string{
		traced.UUID: {
			"traceparent": "00-" + delivery.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01",
			"tracestate":  "vendor=a1",
		},
		untraced.UUID: {},
	}
	for _, r := range recs {
		got := map[string]string{}
		for _, h := range r.Headers {
			if h.Key == "traceparent" || h.Key == "tracestate" {
				if _, twice := got[h.Key]; twice {
					t.Errorf("record %s: header %s twice", headerID(r), h.Key)
				}
				got[h.Key] = string(h.Value)
			}
		}
		w := want[headerID(r)]
		if len(got) != len(w) || got["traceparent"] != w["traceparent"] || got["tracestate"] != w["tracestate"] {
			t.Errorf("record %s: trace headers %v, want %v", headerID(r), got, w)
		}
	}
}

func testRefusedRecordsSpanHasTheError(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return nil, errors.New("response lost"), true
	})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	pub, err := kafkabroker.New(kafkabroker.Config{Brokers: cluster.ListenAddrs(), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	ctx, delivery := tp.Tracer("test").Start(testContext(t, time.Second), "delivery")
	if err := pub.Publish(topic, newMessage(ctx, "account-1", []byte("v"))); err == nil {
		t.Fatal("Publish succeeded while the cluster lost every answer")
	}
	delivery.End()
	// The record's span ends when the client gives the record up, which
	// can be after Publish returned at the deadline: Close waits for it.
	if err := pub.Close(); err != nil {
		t.Logf("Close: %v", err)
	}
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() == delivery.SpanContext().SpanID() {
			if s.Status().Code != codes.Error || s.Status().Description != "publish failed" {
				t.Errorf("span status %v, want an error described as publish failed", s.Status())
			}
			// The error's type is kept, its text nowhere.
			if len(s.Events()) != 0 {
				t.Errorf("span events %v, want none", s.Events())
			}
			var errType string
			for _, kv := range s.Attributes() {
				if kv.Key == "error.type" {
					errType = kv.Value.AsString()
				}
				if strings.Contains(kv.Value.Emit(), "response lost") {
					t.Errorf("attribute %s holds the error's text: %s", kv.Key, kv.Value.Emit())
				}
			}
			if errType == "" {
				t.Error("span lacks error.type")
			}
			return
		}
	}
	t.Fatal("no span of the publish ended")
}

func checkAttributes(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]string) {
	t.Helper()
	for _, kv := range s.Attributes() {
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
}
