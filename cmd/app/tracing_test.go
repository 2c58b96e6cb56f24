package main

import (
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP receiver of spans: it decodes each export
// as a collector does and hands it to the test.
type otlpReceiver struct {
	url     string
	exports chan *coltracepb.ExportTraceServiceRequest
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &otlpReceiver{url: "http://" + ln.Addr().String(), exports: make(chan *coltracepb.ExportTraceServiceRequest, 100)}
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
		rc.exports <- req
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
	close(rc.exports)

	var found *tracepb.Span
	var service string
	for export := range rc.exports {
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
