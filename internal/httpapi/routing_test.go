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

	"github.com/eventsourced/accounts/internal/httpapi"
)

// allows reports whether an Allow header lists method.
func allows(header, method string) bool {
	for m := range strings.SplitSeq(header, ",") {
		if strings.EqualFold(strings.TrimSpace(m), method) {
			return true
		}
	}
	return false
}

// TestRouting holds the routes to their paths and methods: an unknown
// path is a 404 problem and a wrong method a 405 with Allow, changing
// nothing.
func TestRouting(t *testing.T) {
	t.Parallel()
	t.Run("unknown paths and wrong methods", testRouting)
	t.Run("operational paths", testRoutingOperationalPaths)
}

func testRouting(t *testing.T) {
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

// testRoutingOperationalPaths: a wrong method on /healthz and /readyz is a
// wrong method on a known path, too.
func testRoutingOperationalPaths(t *testing.T) {
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

// TestProbes holds /healthz and /readyz to what an orchestrator reads of
// them.
func TestProbes(t *testing.T) {
	t.Parallel()
	t.Run("healthz and readyz", testHealth)
	t.Run("readyz while the database fails", testReadyzNotReady)
}

func testHealth(t *testing.T) {
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

func testReadyzNotReady(t *testing.T) {
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
