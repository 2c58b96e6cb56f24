package httpapi

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/time/rate"

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

// recoverPanics turns a panic in a handler into a 500 problem and a log line.
func recoverPanics(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.ErrorContext(r.Context(), "handler panicked", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
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

// observeRequests logs each request at info, and each 5xx at warn, with
// its method, route, status and duration, and counts it by route and
// status. It logs the route pattern and the path, never the query, where a
// page's code travels.
func observeRequests(log *slog.Logger, m *requestMetrics, next http.Handler) http.Handler {
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
		m.requests.Add(r.Context(), 1, attrs)
		m.duration.Record(r.Context(), took.Seconds(), attrs)
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelWarn
		}
		log.Log(r.Context(), level, "http", "method", r.Method, "route", route, "path", r.URL.Path,
			"status", status, "duration", took)
	})
}

// newClientLimiter returns a limiter that allows each client address
// perMinute requests a minute, in bursts of up to perMinute; perMinute 0
// allows everything. The API and the pages share one, so a client's
// requests count against one budget whichever it uses.
func newClientLimiter(perMinute int, now func() time.Time, trusted []netip.Prefix) *clientLimiter {
	if perMinute <= 0 {
		return nil
	}
	return &clientLimiter{
		every:   time.Minute / time.Duration(perMinute),
		burst:   perMinute,
		now:     now,
		trusted: trusted,
		clients: map[string]*client{},
	}
}

// limit returns next behind the limit; refuse answers a request over it,
// which may come again after wait.
func (l *clientLimiter) limit(next http.Handler, refuse func(w http.ResponseWriter, r *http.Request, wait time.Duration)) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wait := l.reserve(clientAddress(r, l.trusted)); wait > 0 {
			refuse(w, r, wait)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// clientAddress is the IP address the request came from, or for IPv6 its
// /64 network, which one client commonly holds whole. From a peer in
// trusted (the proxies in front of the service), it is the rightmost
// address of X-Forwarded-For that is not itself a trusted proxy: each
// proxy appends the address it received from, so the hops to the right of
// that one were added by proxies the service trusts and the ones to its
// left by whoever sent the request, who may have made them up. From any
// other peer the header is ignored, and behind an untrusted proxy the limit
// is per proxy, which errs on the safe side.
func clientAddress(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return strings.ToLower(host)
	}
	addr = addr.Unmap()
	if isTrusted(addr, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // What is left of a hop that is no address is not to be believed.
			}
			addr = hop.Unmap()
			if !isTrusted(addr, trusted) {
				break
			}
		}
	}
	if addr.Is6() {
		prefix, _ := addr.Prefix(64)
		return prefix.String()
	}
	return addr.String()
}

func isTrusted(addr netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

type client struct {
	limiter *rate.Limiter
	seen    time.Time
}

// clientLimiter holds a token bucket per client address and forgets those
// that have been idle long enough to be full again.
type clientLimiter struct {
	every   time.Duration
	burst   int
	now     func() time.Time
	trusted []netip.Prefix
	mu      sync.Mutex
	clients map[string]*client
	swept   time.Time
}

// reserve takes a token for addr and returns 0, or how long addr must wait.
func (l *clientLimiter) reserve(addr string) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if idle := l.every * time.Duration(l.burst); now.Sub(l.swept) > idle {
		for a, c := range l.clients {
			if now.Sub(c.seen) > idle {
				delete(l.clients, a)
			}
		}
		l.swept = now
	}
	c, ok := l.clients[addr]
	if !ok {
		c = &client{limiter: rate.NewLimiter(rate.Every(l.every), l.burst)}
		l.clients[addr] = c
	}
	c.seen = now
	if c.limiter.AllowN(now, 1) {
		return 0
	}
	r := c.limiter.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return wait
}
