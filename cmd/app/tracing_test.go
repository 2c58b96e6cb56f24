package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/publish/natsbroker/natstest"
	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/user/integration"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// otlpReceiver is an OTLP/HTTP receiver of spans: it decodes each export
// as a collector does and hands it to the test.
type otlpReceiver struct {
	url string

	mu  sync.Mutex
	got []*coltracepb.ExportTraceServiceRequest
}

// exports returns what the receiver has taken so far.
func (rc *otlpReceiver) exports() []*coltracepb.ExportTraceServiceRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &otlpReceiver{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(body, req)
		}
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP export: %v, content type %q", err, r.Header.Get("Content-Type"))
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.got = append(rc.got, req)
		rc.mu.Unlock()
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return rc
}

// The standard OpenTelemetry variables alone make `app serve` export its
// spans over OTLP/HTTP, under the service name they set, in the trace of
// an incoming traceparent, and flush them as it stops. It sets the
// process's environment, which the exporter reads, so it cannot run in
// parallel.
func TestTracingExportsOverOTLPByTheStandardVariables(t *testing.T) {
	rc := startOTLPReceiver(t)
	env := map[string]string{
		"DATABASE_URL":                "sqlite:" + filepath.Join(t.TempDir(), "accounts.db"),
		"HTTP_ADDR":                   "127.0.0.1:0",
		"SMTP_URL":                    smtptest.NewServer(t).URL(),
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": rc.url,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_SERVICE_NAME":           "x",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	app := e2eStart(t, env)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest(http.MethodGet, app.base+"/healthz", nil)
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := app.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	// The stop exports what the batch processor still holds.
	app.stop(t)

	var found *tracepb.Span
	var service string
	for _, export := range rc.exports() {
		for _, rs := range export.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if s.Name == "GET /healthz" {
						found = s
						for _, a := range rs.Resource.Attributes {
							if a.Key == "service.name" {
								service = a.Value.GetStringValue()
							}
						}
					}
				}
			}
		}
	}
	if found == nil {
		t.Fatal(`no span "GET /healthz" reached the receiver`)
	}
	if service != "x" {
		t.Errorf("service.name %q, want x (OTEL_SERVICE_NAME)", service)
	}
	if got := hex.EncodeToString(found.TraceId); got != traceID {
		t.Errorf("span in trace %s, want the incoming traceparent's %s", got, traceID)
	}
	if got := hex.EncodeToString(found.ParentSpanId); got != parentID {
		t.Errorf("span's parent %s, want the incoming traceparent's %s", got, parentID)
	}
	if found.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("span kind %s, want server", found.Kind)
	}
	var route string
	for _, a := range found.Attributes {
		if a.Key == "http.route" {
			route = a.Value.GetStringValue()
		}
	}
	if route != "/healthz" {
		t.Errorf("http.route %q, want /healthz", route)
	}
}

// exportedSpans is every span a receiver took, by trace ID.
type exportedSpans map[string][]*tracepb.Span

func (rc *otlpReceiver) spans() exportedSpans {
	got := exportedSpans{}
	for _, export := range rc.exports() {
		for _, rs := range export.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					id := hex.EncodeToString(s.TraceId)
					got[id] = append(got[id], s)
				}
			}
		}
	}
	return got
}

// named returns the spans of trace that are called name.
func (e exportedSpans) named(trace, name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range e[trace] {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// linkedTo returns the spans called name, in any trace, that link to a
// span of trace.
func (e exportedSpans) linkedTo(trace, name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, spans := range e {
		for _, s := range spans {
			for _, l := range s.Links {
				if s.Name == name && hex.EncodeToString(l.TraceId) == trace {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			if v, ok := a.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return strconv.FormatInt(v.IntValue, 10)
			}
			return a.Value.GetStringValue()
		}
	}
	return ""
}

// One request can be followed from the HTTP call through the outbox to
// the SMTP server and the broker, over OTLP as a collector sees it: the
// command, the first delivery of a sign-in link and its SMTP send are in
// the request's trace; a delivery refused once is retried in a trace of its own that
// links to the request's; a sign-in's user.registered reaches JetStream
// with the sign-in's trace in its traceparent header and CloudEvent
// attribute; and the request's X-Request-Id is echoed and names it in the
// relay's log lines. It sets the process's environment, which the
// exporter reads, so it cannot run in parallel.
func TestTraceFollowsARequestThroughTheOutbox(t *testing.T) {
	rc := startOTLPReceiver(t)
	nats := natstest.Start(t)
	js := nats.JetStream(t)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "ACCOUNTS", Subjects: []string{"accounts.>"}}); err != nil {
		t.Fatal(err)
	}
	mx := smtptest.NewServer(t)
	otel := map[string]string{
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": rc.url,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
	}
	for k, v := range otel {
		t.Setenv(k, v)
	}
	env := map[string]string{
		"DATABASE_URL":    pgtest.NewURL(t),
		"DATA_KEY":        testDataKey,
		"HTTP_ADDR":       "127.0.0.1:0",
		"SMTP_URL":        mx.URL(),
		"BASE_URL":        "http://accounts.test",
		"BROKER_URL":      nats.URL,
		"OUTBOX_INTERVAL": "200ms", // A retry is claimed at the next poll.
	}
	maps.Copy(env, otel)
	app := e2eStart(t, env)

	// post sends body to path under a traceparent of trace and a request
	// ID, and checks the answer's status and X-Request-Id.
	post := func(path, body, trace, requestID string, status int) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, app.base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
		req.Header.Set(requestid.Header, requestID)
		resp, err := app.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != status || resp.Header.Get(requestid.Header) != requestID {
			t.Fatalf("POST %s: %s with %s %q, want %d and %q", path, resp.Status, requestid.Header, resp.Header.Get(requestid.Header), status, requestID)
		}
		return resp
	}
	const (
		linkTrace    = "4bf92f3577b34da6a3ce929d0e0e4736"
		retryTrace   = "5bf92f3577b34da6a3ce929d0e0e4737"
		sessionTrace = "6bf92f3577b34da6a3ce929d0e0e4738"
	)

	// A sign-in link, delivered at the first attempt.
	_ = post("/v1/sign-in-links", `{"email":"ada@example.com"}`, linkTrace, "req-link", http.StatusAccepted).Body.Close()
	code := e2eLinkCode(t, mx.Wait(t, 1, e2eWait)[0], "http://accounts.test/sign-in?code=")

	// Another, refused once by the SMTP server and delivered on the retry,
	// a second later.
	mx.Refuse(451, "4.3.0 try again later")
	retrying := app.logs.seen(`msg="outbox: delivery failed, will retry"`)
	_ = post("/v1/sign-in-links", `{"email":"grace@example.com"}`, retryTrace, "req-retry", http.StatusAccepted).Body.Close()
	select {
	case <-retrying:
	case <-time.After(e2eWait):
		t.Fatal("the refused delivery was not logged")
	}
	mx.Refuse(0, "")
	mx.Wait(t, 2, e2eWait)

	// The first sign-in registers the user: user.registered goes to
	// JetStream in the sign-in's trace.
	_ = post("/v1/sessions", e2eJSON(t, map[string]string{"code": code}), sessionTrace, "req-session", http.StatusCreated).Body.Close()
	registered := streamMessage(t, js, "accounts."+integration.Route(integration.TypeRegistered))
	if got := registered.Headers().Get("traceparent"); !strings.HasPrefix(got, "00-"+sessionTrace+"-") {
		t.Errorf("user.registered's traceparent header %q, want one of trace %s", got, sessionTrace)
	}
	var ce publish.CloudEvent
	if err := json.Unmarshal(registered.Data(), &ce); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ce.TraceParent, "00-"+sessionTrace+"-") {
		t.Errorf("user.registered's CloudEvent traceparent %q, want one of trace %s", ce.TraceParent, sessionTrace)
	}
	registeredTopic := publish.Topic(publish.Broker, integration.TypeRegistered)
	app.awaitMetric(t, "outbox_delivered_total", registeredTopic)

	// The stop exports what the batch processor still holds.
	app.stop(t)
	spans := rc.spans()

	deliver := "outbox deliver " + mail.TopicLoginLink
	t.Run("FirstDeliveryIsInTheRequestsTrace", func(t *testing.T) {
		requests := spans.named(linkTrace, "POST /v1/sign-in-links")
		commands := spans.named(linkTrace, "user.RequestSignInLink")
		deliveries := spans.named(linkTrace, deliver)
		if len(requests) != 1 || len(commands) != 1 || len(deliveries) != 1 {
			t.Fatalf("the request's trace holds %v, want one request, command and delivery", spanNames(spans[linkTrace]))
		}
		if !bytes.Equal(commands[0].ParentSpanId, requests[0].SpanId) {
			t.Errorf("the command's span is not a child of the request's")
		}
		d := deliveries[0]
		// The message keeps the trace context of the unit of work that
		// added it.
		if !bytes.Equal(d.ParentSpanId, commands[0].SpanId) {
			t.Errorf("the delivery's span is not a child of the command's")
		}
		if a, o := spanAttr(d, "outbox.attempt"), spanAttr(d, "outbox.outcome"); a != "1" || o != "delivered" {
			t.Errorf("delivery: attempt %s, outcome %s; want 1, delivered", a, o)
		}
		sends := spans.named(linkTrace, "smtp send")
		if len(sends) != 1 || !bytes.Equal(sends[0].ParentSpanId, d.SpanId) {
			t.Errorf("%d smtp send spans in the request's trace, want 1 under the delivery", len(sends))
		}
	})
	t.Run("RetryIsInANewTraceLinkedToTheRequest", func(t *testing.T) {
		first := spans.named(retryTrace, deliver)
		if len(first) != 1 || spanAttr(first[0], "outbox.outcome") != "retried" {
			t.Fatalf("%d deliveries in the refused request's trace, want 1 that was retried; the trace holds %v", len(first), spanNames(spans[retryTrace]))
		}
		retries := spans.linkedTo(retryTrace, deliver)
		if len(retries) != 1 {
			t.Fatalf("%d deliveries link to the refused request's trace, want 1", len(retries))
		}
		r := retries[0]
		if got := hex.EncodeToString(r.TraceId); got == retryTrace {
			t.Errorf("the retry is in the request's trace, want a trace of its own")
		}
		if a, o := spanAttr(r, "outbox.attempt"), spanAttr(r, "outbox.outcome"); a != "2" || o != "delivered" {
			t.Errorf("retry: attempt %s, outcome %s; want 2, delivered", a, o)
		}
		if len(spans.named(hex.EncodeToString(r.TraceId), "smtp send")) != 1 {
			t.Errorf("the retry's trace holds %v, want its smtp send", spanNames(spans[hex.EncodeToString(r.TraceId)]))
		}
	})
	t.Run("PublishIsInTheSignInsTrace", func(t *testing.T) {
		deliver, send := "outbox deliver "+registeredTopic, "send accounts."+integration.Route(integration.TypeRegistered)
		if len(spans.named(sessionTrace, deliver)) != 1 || len(spans.named(sessionTrace, send)) != 1 {
			t.Errorf("the sign-in's trace holds %v, want %q and %q", spanNames(spans[sessionTrace]), deliver, send)
		}
	})
	t.Run("RequestIDNamesTheRelaysLines", func(t *testing.T) {
		logs := app.logs.String()
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, `msg="outbox: delivery failed, will retry"`) && !strings.Contains(line, "request_id=req-retry") {
				t.Errorf("the relay's line about the refused delivery does not name its request: %s", line)
			}
		}
		if !strings.Contains(logs, "request_id=req-link") {
			t.Errorf("no log line names the request req-link")
		}
	})
}

// spanNames returns the names of spans, for a failure's message.
func spanNames(spans []*tracepb.Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// streamMessage returns the first message on subject of the stream
// ACCOUNTS.
func streamMessage(t *testing.T, js jetstream.JetStream, subject string) jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), e2eWait)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "ACCOUNTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(e2eWait))
	if err != nil {
		t.Fatalf("no message on %s: %v", subject, err)
	}
	return m
}
