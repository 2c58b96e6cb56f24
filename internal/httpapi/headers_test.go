package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/httpapi"
)

// TestSecurityHeaders holds every answer, the API's JSON and problems as
// much as the pages, to the headers that docs/api.md promises:
// X-Content-Type-Options: nosniff always, and Strict-Transport-Security
// when BASE_URL is https.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, baseURL, hsts string
	}{
		{"https", "https://accounts.example.com", "max-age=31536000"},
		{"https behind a path", "https://example.com/accounts/", "max-age=31536000"},
		{"http", "http://127.0.0.1:8080", ""},
		{"no base URL", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testSecurityHeaders(t, c.baseURL, c.hsts)
		})
	}
}

// kindOfAnswer is a request that gets one kind of answer from the server
// that h makes.
type kindOfAnswer struct {
	name           string
	h              func(httpapi.Deps) http.Handler
	method, target string
	header         map[string]string
	body           string
	status         int
}

// answers are requests that between them get every kind of answer the
// server gives: JSON, none, a problem, a page, an asset, a redirect.
func answers() []kindOfAnswer {
	plain := httpapi.NewServer
	auth := map[string]string{"Authorization": "Bearer " + fakeToken}
	asJSON := map[string]string{"Content-Type": "application/json"}
	panicking := func(d httpapi.Deps) http.Handler { d.Users = panicky{}; return httpapi.NewServer(d) }
	notReady := func(d httpapi.Deps) http.Handler {
		d.Ready = func(context.Context) error { return errors.New("down") }
		return httpapi.NewServer(d)
	}
	return []kindOfAnswer{
		{"JSON", plain, "GET", "/v1/me", auth, "", http.StatusOK},
		{"no body", plain, "POST", "/v1/sign-in-links", asJSON, emailBody("ada@example.com"), http.StatusAccepted},
		{"no content", plain, "DELETE", "/v1/sessions/current", auth, "", http.StatusNoContent},
		{"a problem", plain, "POST", "/v1/sign-in-links", asJSON, emailBody("nope"), http.StatusBadRequest},
		{"401", plain, "GET", "/v1/me", nil, "", http.StatusUnauthorized},
		{"404", plain, "GET", "/v1/nope", nil, "", http.StatusNotFound},
		{"a browser's 404", plain, "GET", "/nope", map[string]string{"Accept": "text/html"}, "", http.StatusNotFound},
		{"405", plain, "PUT", "/v1/me", nil, "", http.StatusMethodNotAllowed},
		{"a panic", panicking, "GET", "/v1/me", auth, "", http.StatusInternalServerError},
		{"a probe", plain, "GET", "/healthz", nil, "", http.StatusOK},
		{"not ready", notReady, "GET", "/readyz", nil, "", http.StatusServiceUnavailable},
		{"the OpenAPI document", plain, "GET", "/openapi.json", nil, "", http.StatusOK},
		{"a page", plain, "GET", "/", nil, "", http.StatusOK},
		{"an asset", plain, "GET", "/assets/pages.js", nil, "", http.StatusOK},
		{"a redirect", plain, "POST", "/sign-out", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "", http.StatusSeeOther},
	}
}

func testSecurityHeaders(t *testing.T, baseURL, hsts string) {
	for _, a := range answers() {
		h := a.h(httpapi.Deps{Users: fakeUsers{}, BaseURL: baseURL, Now: func() time.Time { return start }})
		r := serve(t, h, a.method, a.target, "", a.header, []byte(a.body))
		if r.status != a.status {
			t.Errorf("%s (%s %s): status %d, want %d (%s)", a.name, a.method, a.target, r.status, a.status, r)
		}
		if got := r.header.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
			t.Errorf("%s (%s %s %d): X-Content-Type-Options %q, want [nosniff]", a.name, a.method, a.target, r.status, got)
		}
		if got := r.header.Values("Strict-Transport-Security"); hsts == "" && len(got) != 0 || hsts != "" && (len(got) != 1 || got[0] != hsts) {
			t.Errorf("%s (%s %s %d) under BASE_URL %q: Strict-Transport-Security %q, want %q", a.name, a.method, a.target, r.status, baseURL, got, hsts)
		}
	}
}
