package httpapi_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/httpapi"
)

// TestClientRateLimit holds the limit of requests per client address
// (Deps.RateLimit) to what it promises.
func TestClientRateLimit(t *testing.T) {
	t.Parallel()
	t.Run("the fourth request in a minute", testClientRateLimit)
	t.Run("per client", testClientRateLimitPerClient)
	t.Run("behind trusted proxies", testClientRateLimitBehindTrustedProxies)
	t.Run("off", testClientRateLimitOff)
	t.Run("every route but the probes", testClientRateLimitEveryRoute)
}

// testClientRateLimit: with RateLimit 3, the 4th request of one client in a
// minute gets 429 with an honest Retry-After, changing nothing; /healthz is
// not limited.
func testClientRateLimit(t *testing.T) {
	t.Parallel()
	e := setupWith(t, options{rateLimit: 3})

	for range 3 {
		wantUnauthenticated(t, "request within the limit", e.get(t, "/v1/me", ""))
	}
	before := e.snapshot(t)
	// The 4th is a request that would otherwise succeed.
	r := e.post(t, "/v1/sign-in-links", "", emailBody("ada@example.com"))
	wantProblem(t, "4th request in a minute", r, http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	wait := wantRetryAfter(t, "4th request", r)
	if wait != 20*time.Second {
		t.Errorf("Retry-After %s, want 20s: 3 a minute gives a token every 20s", wait)
	}
	e.unchanged(t, "a request over the client limit", before)
	// Every endpoint shares the limit.
	for _, req := range []request{
		{method: "POST", path: "/v1/sessions", body: codeBody("x")},
		{method: "GET", path: "/v1/me"},
		{method: "POST", path: "/v1/me/email-change", body: newEmailBody("a@example.com")},
		{method: "POST", path: "/v1/email-changes", body: codeBody("x")},
		{method: "DELETE", path: "/v1/sessions/current"},
	} {
		r := e.send(t, req)
		wantProblem(t, req.method+" "+req.path+" over the limit", r, http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
		wantRetryAfter(t, req.method+" "+req.path+" over the limit", r)
	}
	e.unchanged(t, "requests over the client limit", before)

	// /healthz and /readyz are not limited.
	for range 20 {
		wantStatus(t, "GET /healthz over the limit", e.get(t, "/healthz", ""), http.StatusOK)
		wantStatus(t, "GET /readyz over the limit", e.get(t, "/readyz", ""), http.StatusOK)
	}

	// A second before Retry-After is still too early; on time, one request
	// passes and the next waits again.
	e.clock.Advance(wait - time.Second)
	wantProblem(t, "a second early", e.get(t, "/v1/me", ""), http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	e.clock.Advance(time.Second)
	wantStatus(t, "after Retry-After", e.post(t, "/v1/sign-in-links", "", emailBody("ada@example.com")), http.StatusAccepted)
	wantProblem(t, "right after", e.get(t, "/v1/me", ""), http.StatusTooManyRequests, httpapi.TypeTooManyRequests)

	// After a quiet minute the whole burst is back.
	e.clock.Advance(time.Minute)
	for range 3 {
		wantUnauthenticated(t, "after a quiet minute", e.get(t, "/v1/me", ""))
	}
	wantProblem(t, "4th after a quiet minute", e.get(t, "/v1/me", ""), http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
}

// testClientRateLimitPerClient: each client address has its own budget.
func testClientRateLimitPerClient(t *testing.T) {
	t.Parallel()
	now := start
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, RateLimit: 2, Now: func() time.Time { return now }})
	me := func(remote string) response {
		return serve(t, h, "GET", "/v1/me", remote, map[string]string{"Authorization": "Bearer " + fakeToken}, nil)
	}
	for range 2 {
		wantStatus(t, "client A within its limit", me("192.0.2.1:1000"), http.StatusOK)
	}
	// Another port of the same address is the same client.
	r := me("192.0.2.1:2000")
	wantProblem(t, "client A from another port", r, http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	if wait := wantRetryAfter(t, "client A", r); wait != 30*time.Second {
		t.Errorf("Retry-After %s, want 30s", wait)
	}
	// Other clients, IPv4 and IPv6, are not held back by A.
	for _, remote := range []string{"192.0.2.2:1000", "[2001:db8::1]:1000", "[2001:db8:0:1::1]:1000", "[::ffff:192.0.2.3]:1000"} {
		for range 2 {
			wantStatus(t, "client "+remote, me(remote), http.StatusOK)
		}
		wantProblem(t, "client "+remote+" over its limit", me(remote), http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	}
	// An IPv6 client commonly holds a whole /64: its addresses share a budget.
	wantProblem(t, "another address of the first IPv6 /64", me("[2001:DB8::2]:1000"), http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	// An IPv4-mapped IPv6 address is that IPv4 client.
	wantProblem(t, "client A as IPv4-mapped IPv6", me("[::ffff:192.0.2.1]:1000"), http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	// /healthz is not limited even for a client over its limit.
	wantStatus(t, "/healthz", serve(t, h, "GET", "/healthz", "192.0.2.1:1000", nil, nil), http.StatusOK)
}

// testClientRateLimitBehindTrustedProxies: from a trusted proxy the client
// is the rightmost hop of X-Forwarded-For that is no trusted proxy; from
// anyone else the header changes nothing.
func testClientRateLimitBehindTrustedProxies(t *testing.T) {
	t.Parallel()
	now := start
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, RateLimit: 1, Now: func() time.Time { return now },
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}})
	me := func(remote, xff string) int {
		headers := map[string]string{"Authorization": "Bearer " + fakeToken}
		if xff != "" {
			headers["X-Forwarded-For"] = xff
		}
		return serve(t, h, "GET", "/v1/me", remote, headers, nil).status
	}
	// Two clients behind one proxy each have their budget.
	if me("10.0.0.5:1000", "198.51.100.1") != http.StatusOK || me("10.0.0.5:1000", "198.51.100.2") != http.StatusOK {
		t.Fatal("two clients behind the proxy share a budget")
	}
	if got := me("10.0.0.6:1000", "198.51.100.1"); got != http.StatusTooManyRequests {
		t.Errorf("the first client again, through another proxy: %d, want 429", got)
	}
	// A client cannot escape by putting made-up hops to the left: the
	// rightmost untrusted hop counts, through a chain of trusted proxies.
	if got := me("10.0.0.5:1000", "203.0.113.9, 198.51.100.2, 10.0.0.7"); got != http.StatusTooManyRequests {
		t.Errorf("a made-up hop left of the second client: %d, want 429", got)
	}
	// From a peer that is not a trusted proxy, the header is ignored.
	if me("192.0.2.50:1000", "198.51.100.3") != http.StatusOK {
		t.Fatal("first request of an untrusted peer refused")
	}
	if got := me("192.0.2.50:1000", "198.51.100.4"); got != http.StatusTooManyRequests {
		t.Errorf("an untrusted peer changed its client by the header: %d, want 429", got)
	}
	// A hop that is no address ends the walk: the hop right of it counts.
	if got := me("10.0.0.5:1000", "garbage, 198.51.100.5"); got != http.StatusOK {
		t.Errorf("a new client behind a garbage hop: %d, want 200", got)
	}
	// IPv6 proxies too, and the client's /64.
	if me("[2001:db8:ffff::1]:1000", "2001:db8:1::1") != http.StatusOK {
		t.Fatal("first request of an IPv6 client behind an IPv6 proxy refused")
	}
	if got := me("[2001:db8:ffff::2]:1000", "2001:db8:1::2"); got != http.StatusTooManyRequests {
		t.Errorf("another address of the client's /64: %d, want 429", got)
	}
}

// testClientRateLimitOff: RateLimit 0 lets everything through.
func testClientRateLimitOff(t *testing.T) {
	t.Parallel()
	e := setupWith(t, options{rateLimit: 0})
	for i := range 50 {
		r := e.get(t, "/v1/me", "")
		if r.status == http.StatusTooManyRequests {
			t.Fatalf("request %d: 429 with the limit off", i+1)
		}
		wantUnauthenticated(t, "request with the limit off", r)
	}
}

// testClientRateLimitEveryRoute: every request counts against its client's
// limit, whatever route it takes or none: the pages the mailed links open,
// a 404, a 405, the OpenAPI document, /metrics on the API's listener, the
// pages' assets. Over it, a page's path answers an HTML page, and so does
// a path of no route to a browser; the API, the operational paths and a
// client that is no browser get a problem. The log names the route
// refused. The probes are never counted.
func testClientRateLimitEveryRoute(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, RateLimit: 1, Now: func() time.Time { return start },
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("# metrics\n"))
		}),
		Log: slog.New(slog.NewJSONHandler(&log, nil))})
	browser := map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
	cases := []struct {
		method, target string
		header         map[string]string
		route          string // as the log and the metrics name it
		page           bool   // the refusal is an HTML page, else a problem
	}{
		{"GET", "/sign-in?code=" + strings.Repeat("a", 32), nil, "GET /sign-in", true},
		{"GET", "/confirm-email?code=" + strings.Repeat("a", 32), nil, "GET /confirm-email", true},
		{"GET", "/", nil, "GET /{$}", true},
		{"POST", "/sign-in", nil, "POST /sign-in", true},
		{"PUT", "/account", nil, "/account", true},
		{"GET", "/nope", nil, "/", false},
		{"GET", "/nope", browser, "/", true},
		{"GET", "/v1/nope", browser, "/", false},
		{"PUT", "/v1/me", nil, "/v1/me", false},
		{"GET", "/v1/me", nil, "GET /v1/me", false},
		{"GET", "/openapi.json", nil, "GET /openapi.json", false},
		{"GET", "/metrics", nil, "GET /metrics", false},
		{"GET", "/assets/pages.css", nil, "GET /assets/pages.css", false},
		{"GET", "/favicon.ico", nil, "GET /favicon.ico", false},
	}
	for i, c := range cases {
		what := c.method + " " + c.target
		remote := "192.0.2." + strconv.Itoa(i+1) + ":1000"
		if r := serve(t, h, c.method, c.target, remote, c.header, nil); r.status == http.StatusTooManyRequests {
			t.Fatalf("%s: the first request of a client refused: %s", what, r)
		}
		r := serve(t, h, c.method, c.target, remote, c.header, nil)
		if c.page {
			if r.status != http.StatusTooManyRequests || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
				t.Errorf("%s, second in a minute: %d %s, want a 429 page", what, r.status, r.header.Get("Content-Type"))
			}
		} else {
			wantProblem(t, what+", second in a minute", r, http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
		}
		wantRetryAfter(t, what+", second in a minute", r)
	}

	// The probes answer a client over its limit, however often it asks.
	const remote = "192.0.2.1:1000"
	for range 20 {
		for _, path := range []string{"/healthz", "/readyz"} {
			for _, method := range []string{"GET", "HEAD"} {
				wantStatus(t, method+" "+path+" over the limit", serve(t, h, method, path, remote, nil, nil), http.StatusOK)
			}
		}
	}

	// Each refusal is logged and counted under the route it was refused
	// on, as its answer would have been.
	refused := map[string]int{}
	for _, l := range bytes.Split(bytes.TrimSpace(log.Bytes()), []byte("\n")) {
		var line struct {
			Msg    string `json:"msg"`
			Route  string `json:"route"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal(l, &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if line.Msg == "http" && line.Status == http.StatusTooManyRequests {
			refused[line.Route]++
		}
	}
	for _, c := range cases {
		if refused[c.route] == 0 {
			t.Errorf("%s %s: no 429 logged under route %q; logged %v", c.method, c.target, c.route, refused)
		}
	}
}
