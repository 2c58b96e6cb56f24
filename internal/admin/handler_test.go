package admin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/admin"
)

// text is a handler that answers 200 with body.
func text(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })
}

func TestHandler(t *testing.T) {
	t.Parallel()
	deps := admin.Deps{Metrics: text("metrics"), Health: text("healthy"), Ready: text("ready")}
	get := func(t *testing.T, h http.Handler, method, path string) (int, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), method, path, nil))
		return rec.Code, rec.Body.String()
	}
	t.Run("ServesMetricsAndProbes", func(t *testing.T) {
		t.Parallel()
		h := admin.NewHandler(deps)
		for path, want := range map[string]string{"/metrics": "metrics", "/healthz": "healthy", "/readyz": "ready"} {
			if code, body := get(t, h, "GET", path); code != http.StatusOK || body != want {
				t.Errorf("GET %s: %d %q, want 200 %q", path, code, body, want)
			}
		}
		if code, _ := get(t, h, "POST", "/metrics"); code != http.StatusMethodNotAllowed {
			t.Errorf("POST /metrics: %d, want 405", code)
		}
		if code, _ := get(t, h, "GET", "/v1/me"); code != http.StatusNotFound {
			t.Errorf("GET /v1/me: %d, want 404: the admin listener serves no API", code)
		}
	})
	t.Run("PprofOffByDefault", func(t *testing.T) {
		t.Parallel()
		h := admin.NewHandler(deps)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline", "/debug/pprof/profile", "/debug/pprof/symbol", "/debug/pprof/trace"} {
			if code, _ := get(t, h, "GET", path); code != http.StatusNotFound {
				t.Errorf("GET %s without Pprof: %d, want 404", path, code)
			}
		}
	})
	t.Run("PprofWhenAskedFor", func(t *testing.T) {
		t.Parallel()
		d := deps
		d.Pprof = true
		h := admin.NewHandler(d)
		for path, want := range map[string]string{
			"/debug/pprof/":                  "goroutine",
			"/debug/pprof/goroutine?debug=1": "goroutine profile:",
			"/debug/pprof/heap?debug=1":      "heap profile:",
			"/debug/pprof/symbol":            "num_symbols:",
			"/debug/pprof/cmdline":           "admin.test",
		} {
			code, body := get(t, h, "GET", path)
			if code != http.StatusOK || !strings.Contains(body, want) {
				t.Errorf("GET %s: %d, want 200 with %q:\n%.300s", path, code, want, body)
			}
		}
		if code, body := get(t, h, "GET", "/metrics"); code != http.StatusOK || body != "metrics" {
			t.Errorf("GET /metrics beside pprof: %d %q", code, body)
		}
	})
	t.Run("LeavesOutAMissingProbe", func(t *testing.T) {
		t.Parallel()
		h := admin.NewHandler(admin.Deps{Metrics: text("metrics")})
		if code, _ := get(t, h, "GET", "/readyz"); code != http.StatusNotFound {
			t.Errorf("GET /readyz with no Ready: %d, want 404", code)
		}
	})
}
