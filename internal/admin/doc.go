// Package admin is the operator's HTTP side, served on a listener of its
// own (ADMIN_ADDR) that only operators and the metrics scraper reach:
// /metrics, the probes /healthz and /readyz, and, when asked for, Go's
// profiler under /debug/pprof/.
//
// [NewHandler] takes what it serves as [Deps] and returns one
// http.Handler. It answers GET (and HEAD) on those paths, 405 with Allow
// on another method, and 404 on any other path; the profiler's paths are
// 404 unless [Deps.Pprof] is set. The public listener serves none of them
// but the probes once an admin listener is configured.
package admin
