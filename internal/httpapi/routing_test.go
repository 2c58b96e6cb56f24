package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/httpapi"
)

func TestRouting(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.signIn(t, "ada@example.com")
	before := e.snapshot(t)

	for _, path := range []string{"/nope", "/index.html", "/account/", "/sign-in/x", "/v1", "/v1/", "/v2/me", "/v1/me/", "/v1/sessions/", "/v1/sessions/other", "/v1/sign-in-link", "/V1/me", "/v1/me/email-change/x"} {
		r := e.get(t, path, s.Token)
		wantProblem(t, "GET "+path, r, http.StatusNotFound, httpapi.TypeNotFound)
		r = e.post(t, path, s.Token, emailBody("ada@example.com"))
		wantProblem(t, "POST "+path, r, http.StatusNotFound, httpapi.TypeNotFound)
	}

	for _, c := range []struct{ path, allowed string }{
		{"/v1/sign-in-links", "POST"},
		{"/v1/sessions", "POST"},
		{"/v1/me", "GET, DELETE"},
		{"/v1/me/email-change", "POST"},
		{"/v1/email-changes", "POST"},
		{"/v1/sessions/current", "DELETE"},
	} {
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
			if slices.Contains(strings.Split(c.allowed, ", "), method) {
				continue
			}
			body := ""
			if method != "GET" && method != "OPTIONS" {
				body = emailBody("ada@example.com")
			}
			r := e.send(t, request{method: method, path: c.path, token: s.Token, body: body})
			what := method + " " + c.path
			wantProblem(t, what, r, http.StatusMethodNotAllowed, httpapi.TypeMethodNotAllowed)
			for _, m := range strings.Split(c.allowed, ", ") {
				if allow := r.header.Get("Allow"); !allows(allow, m) {
					t.Errorf("%s: Allow %q, want it to list %s", what, allow, m)
				}
			}
		}
	}
	e.unchanged(t, "requests to unknown routes", before)
	e.me(t, s.Token) // the session is untouched
}

// TestRoutingOperationalPaths: a wrong method on /healthz and /readyz is a
// wrong method on a known path, too.
func TestRoutingOperationalPaths(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		for _, method := range []string{"POST", "PUT", "DELETE"} {
			r := e.send(t, request{method: method, path: path})
			what := method + " " + path
			if r.status != http.StatusMethodNotAllowed {
				t.Errorf("%s: %s, want 405 %s with Allow: GET", what, bytes.TrimSpace([]byte(r.String())), httpapi.TypeMethodNotAllowed)
				continue
			}
			wantProblem(t, what, r, http.StatusMethodNotAllowed, httpapi.TypeMethodNotAllowed)
			if allow := r.header.Get("Allow"); !allows(allow, "GET") {
				t.Errorf("%s: Allow %q, want it to list GET", what, allow)
			}
		}
	}
}

// allows reports whether an Allow header lists method.
func allows(header, method string) bool {
	for m := range strings.SplitSeq(header, ",") {
		if strings.EqualFold(strings.TrimSpace(m), method) {
			return true
		}
	}
	return false
}

func TestHealth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.get(t, "/healthz", "")
	wantStatus(t, "GET /healthz", r, http.StatusOK)
	if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Errorf("/healthz Content-Type %q", r.header.Get("Content-Type"))
	}
	r = e.get(t, "/readyz", "")
	wantStatus(t, "GET /readyz with a live database", r, http.StatusOK)
	wantStatus(t, "HEAD /healthz", e.send(t, request{method: http.MethodHead, path: "/healthz"}), http.StatusOK)
}

func TestReadyzNotReady(t *testing.T) {
	t.Parallel()
	var called atomic.Bool
	e := setupWith(t, options{ready: func(ctx context.Context) error {
		called.Store(true)
		if _, ok := ctx.Deadline(); !ok {
			t.Errorf("Ready was called without a deadline")
		}
		return errors.New("database down")
	}})
	r := e.get(t, "/readyz", "")
	p := wantProblem(t, "GET /readyz with a failing database", r, http.StatusServiceUnavailable, httpapi.TypeNotReady)
	if strings.Contains(p.Detail, "database down") {
		t.Errorf("the problem shows the internal error: %q", p.Detail)
	}
	if !called.Load() {
		t.Errorf("Ready was not called")
	}
	// Liveness does not depend on the database.
	wantStatus(t, "GET /healthz", e.get(t, "/healthz", ""), http.StatusOK)
}

// TestClientRateLimit: with RateLimit 3, the 4th request of one client in a
// minute gets 429 with an honest Retry-After, changing nothing; /healthz is
// not limited.
func TestClientRateLimit(t *testing.T) {
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

// TestClientRateLimitOff: RateLimit 0 lets everything through.
func TestClientRateLimitOff(t *testing.T) {
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
