package admin

import (
	"net/http"
	// The package registers its handlers on http.DefaultServeMux as well,
	// which nothing in this service serves.
	"net/http/pprof"
)

// Deps are what [NewHandler] serves.
type Deps struct {
	// Metrics serves /metrics in the Prometheus text format.
	Metrics http.Handler
	// Health and Ready serve the liveness and readiness probes, /healthz
	// and /readyz; nil leaves a probe out.
	Health, Ready http.Handler
	// Pprof serves Go's profiler under /debug/pprof/: CPU and heap
	// profiles, goroutine dumps, execution traces. It shows the program's
	// memory and command line, so it is off unless asked for.
	Pprof bool
}

// NewHandler returns the admin listener's handler.
func NewHandler(d Deps) http.Handler {
	mux := http.NewServeMux()
	get := func(path string, h http.Handler) {
		if h != nil {
			mux.Handle("GET "+path, h)
		}
	}
	get("/metrics", d.Metrics)
	get("/healthz", d.Health)
	get("/readyz", d.Ready)
	if d.Pprof {
		// As net/http/pprof registers them itself: any method, since go
		// tool pprof looks symbols up with a POST. pprof.Index serves the
		// named profiles (heap, goroutine, ...) under the same prefix.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
