package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TraceSink is an OTLP/HTTP receiver of spans on loopback that counts
// what it is sent and keeps none of it, so that a benchmark can measure
// what exporting its spans costs the app without a collector. It decodes
// each export to count its spans, which shows whether the batch span
// processor dropped some; that costs about a hundredth of what encoding
// them cost the app.
type TraceSink struct {
	// URL is where spans go (the endpoint's /v1/traces).
	URL string

	srv                   *http.Server
	exports, bytes, spans atomic.Int64
}

// StartTraceSink starts a sink on a free port of loopback.
func StartTraceSink() (*TraceSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: trace sink: %w", err)
	}
	s := &TraceSink{URL: "http://" + ln.Addr().String() + "/v1/traces"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var export coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &export)
		}
		if err != nil {
			http.Error(w, "cannot read the export", http.StatusBadRequest)
			return
		}
		n := 0
		for _, rs := range export.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
		s.exports.Add(1)
		s.bytes.Add(int64(len(body)))
		s.spans.Add(int64(n))
		// An empty ExportTraceServiceResponse: every span accepted.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	s.srv = &http.Server{Handler: mux}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Received returns how many exports the sink took, their bytes and their
// spans.
func (s *TraceSink) Received() (exports, bytes, spans int64) {
	return s.exports.Load(), s.bytes.Load(), s.spans.Load()
}

// Close stops the sink.
func (s *TraceSink) Close() error { return s.srv.Close() }
