package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// newClientLimiter returns a limiter that allows each client address
// perMinute requests a minute, in bursts of up to perMinute; perMinute 0
// allows everything. Every route shares one, so a client's requests count
// against one budget whichever it uses.
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

// limit returns next behind the limit, which every request counts against
// but those that exempt lets through; refuse answers a request over it,
// which may come again after wait.
func (l *clientLimiter) limit(next http.Handler, exempt func(*http.Request) bool, refuse func(w http.ResponseWriter, r *http.Request, wait time.Duration)) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
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
