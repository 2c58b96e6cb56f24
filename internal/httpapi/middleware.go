package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/eventsourced/accounts/internal/requestid"
)

// nameRequests gives each request an ID before anything else runs: the
// client's X-Request-Id when it is [requestid.Valid], a new one otherwise.
// The ID goes in the request's context, where the log lines, the unit of
// work and the problem details read it, and in the response's header,
// which every answer carries, a panic's and a 404's too.
func nameRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(requestid.Header)
		if !requestid.Valid(id) {
			id = requestid.New()
		}
		w.Header().Set(requestid.Header, id)
		next.ServeHTTP(w, r.WithContext(requestid.With(r.Context(), id)))
	})
}

// hstsMaxAge is the max-age of Strict-Transport-Security: a year, in
// seconds.
const hstsMaxAge = "31536000"

// secureHeaders sets on every answer, before anything else can write it,
// X-Content-Type-Options: nosniff, so that no browser takes a JSON body or
// a problem for a script or a page; and, when the service's base URL is
// https, Strict-Transport-Security for a year (this host only, not its
// subdomains), so that a browser that has once reached the service over
// https never goes to it over plain http again. Browsers ignore the
// header on an answer that came over plain http, so it is sent whether
// TLS ends here or at a proxy in front.
func secureHeaders(base *url.URL, next http.Handler) http.Handler {
	hsts := base != nil && base.Scheme == "https"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if hsts {
			h.Set("Strict-Transport-Security", "max-age="+hstsMaxAge)
		}
		next.ServeHTTP(w, r)
	})
}

// maxLogged bounds each value of a request that a log line repeats: the
// method and the path are the client's to choose, up to the 1 MB of
// headers that net/http reads.
const maxLogged = 256

// clip returns s cut to maxLogged bytes at a character's start, and an
// ellipsis after it when it was cut, for a log line.
func clip(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	cut := maxLogged
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// recoverPanics turns a panic in a handler into a 500 problem and a log line.
func recoverPanics(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.ErrorContext(r.Context(), "handler panicked", "path", clip(r.URL.Path), "panic", p, "stack", string(debug.Stack()))
				writeProblem(w, r, http.StatusInternalServerError, TypeInternal, "")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestMetrics are the API's instruments.
type requestMetrics struct {
	requests metric.Int64Counter
	duration metric.Float64Histogram
}

func newRequestMetrics(m metric.Meter) (*requestMetrics, error) {
	requests, err := m.Int64Counter("http.server.requests",
		metric.WithDescription("Requests answered, by route and status."), metric.WithUnit("{request}"))
	if err != nil {
		return nil, fmt.Errorf("httpapi: metrics: %w", err)
	}
	duration, err := m.Float64Histogram("http.server.request.duration",
		metric.WithDescription("How long requests took, by route and status."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		return nil, fmt.Errorf("httpapi: metrics: %w", err)
	}
	return &requestMetrics{requests: requests, duration: duration}, nil
}

// observer logs and counts each request.
type observer struct {
	log     *slog.Logger
	metrics *requestMetrics
	clients *clientNames
}

// observeRequests logs each request at info, and each 5xx at warn, with
// its method, route, path, status and duration and the name of its client
// ([clientNames]), and counts it by route and status. It logs the route
// pattern and the path, never the query, where a page's code travels; the
// method and the path are clipped ([clip]).
func (o observer) observeRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		took := time.Since(start)
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		// The mux set the pattern it matched on r. A path of no route
		// matches the catch-all "/", so that paths cannot grow the series;
		// "unmatched" is a request the mux answered without matching one:
		// a request-target of "*" (other than OPTIONS *, which net/http
		// answers itself).
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		attrs := metric.WithAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
		o.metrics.requests.Add(r.Context(), 1, attrs)
		o.metrics.duration.Record(r.Context(), took.Seconds(), attrs)
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelWarn
		}
		o.log.Log(r.Context(), level, "http", "method", clip(r.Method), "route", route, "path", clip(r.URL.Path),
			"status", status, "duration", took, "client", o.clients.name(r))
	})
}
