package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// TraceSink is an OTLP/HTTP receiver of spans on loopback that counts
// what it is sent and keeps none of it, so that a benchmark can measure
// what exporting its spans costs the app without a collector. It does not
// decode the exports: that would be the collector's work, not the app's.
type TraceSink struct {
	// URL is where spans go (the endpoint's /v1/traces).
	URL string

	srv            *http.Server
	exports, bytes atomic.Int64
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
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, "cannot read the export", http.StatusBadRequest)
			return
		}
		s.exports.Add(1)
		s.bytes.Add(n)
		// An empty ExportTraceServiceResponse: every span accepted.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	s.srv = &http.Server{Handler: mux}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Received returns how many exports the sink took and their bytes.
func (s *TraceSink) Received() (exports, bytes int64) { return s.exports.Load(), s.bytes.Load() }

// Close stops the sink.
func (s *TraceSink) Close() error { return s.srv.Close() }
