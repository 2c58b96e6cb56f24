package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

// The admin listener (ADMIN_ADDR): /metrics, the probes and, when asked
// for, the profiler, on a listener of their own; the API's listener then
// serves neither /metrics nor /debug/pprof/.
func TestAdminListener(t *testing.T) {
	t.Parallel()
	sqlite := func(t *testing.T, env map[string]string) map[string]string {
		env["DATABASE_URL"] = "sqlite:" + filepath.Join(t.TempDir(), "accounts.db")
		env["ADMIN_ADDR"] = "127.0.0.1:0"
		env["SMTP_URL"] = smtptest.NewServer(t).URL()
		return env
	}
	t.Run("TakesMetricsOffThePublicListener", func(t *testing.T) {
		t.Parallel()
		app, adminBase := adminStart(t, sqlite(t, map[string]string{"HTTP_ADDR": "127.0.0.1:0"}))
		for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
			adminExpect(t, app.client, app.base+path, http.StatusNotFound, "")
		}
		adminExpect(t, app.client, app.base+"/healthz", http.StatusOK, `"ok"`)
		adminExpect(t, app.client, app.base+"/readyz", http.StatusOK, `"ready"`)
		// A request to the API is counted on the admin listener's metrics.
		adminExpect(t, app.client, adminBase+"/metrics", http.StatusOK, `http_server_requests_total{http_response_status_code="200",http_route="GET /healthz"} 1`)
		adminExpect(t, app.client, adminBase+"/metrics", http.StatusOK, "go_goroutines ")
		adminExpect(t, app.client, adminBase+"/healthz", http.StatusOK, `"ok"`)
		adminExpect(t, app.client, adminBase+"/readyz", http.StatusOK, `"ready"`)
		// The profiler is off unless asked for.
		adminExpect(t, app.client, adminBase+"/debug/pprof/", http.StatusNotFound, "")
		adminExpect(t, app.client, adminBase+"/v1/me", http.StatusNotFound, "")
		app.stop(t)
	})
	t.Run("ServesThePprofWhenAskedFor", func(t *testing.T) {
		t.Parallel()
		app, adminBase := adminStart(t, sqlite(t, map[string]string{"HTTP_ADDR": "127.0.0.1:0", "ADMIN_PPROF": "true"}))
		adminExpect(t, app.client, adminBase+"/debug/pprof/goroutine?debug=1", http.StatusOK, "goroutine profile:")
		adminExpect(t, app.client, adminBase+"/debug/pprof/heap?debug=1", http.StatusOK, "heap profile:")
		adminExpect(t, app.client, app.base+"/debug/pprof/goroutine?debug=1", http.StatusNotFound, "")
		app.stop(t)
	})
	t.Run("GivesARelayOnlyInstanceMetricsAndProbes", func(t *testing.T) {
		t.Parallel()
		app, adminBase := adminStart(t, sqlite(t, map[string]string{"API": "false", "PROJECTIONS": "false"}))
		adminExpect(t, app.client, adminBase+"/metrics", http.StatusOK, "outbox_backlog_due ")
		adminExpect(t, app.client, adminBase+"/readyz", http.StatusOK, `"ready"`)
		app.stop(t)
	})
	t.Run("ServesUntilThePartsHaveStopped", func(t *testing.T) {
		t.Parallel()
		// SHUTDOWN_DELAY keeps the stop going long enough to watch it.
		app, adminBase := adminStart(t, sqlite(t, map[string]string{"HTTP_ADDR": "127.0.0.1:0", "SHUTDOWN_DELAY": "3s"}))
		app.cancel()
		<-app.logs.seen(`msg=stopping`)
		adminExpect(t, app.client, adminBase+"/readyz", http.StatusServiceUnavailable, "stopping")
		adminExpect(t, app.client, adminBase+"/metrics", http.StatusOK, "go_goroutines ")
		select {
		case app.result = <-app.done:
			app.returned = true
		case <-time.After(e2eWait):
			t.Fatalf("serve did not stop within %s of its context's end", e2eWait)
		}
		if app.result != nil {
			t.Fatalf("serve: %v", app.result)
		}
		if !strings.Contains(app.logs.String(), `msg="admin stopped"`) {
			t.Errorf("no admin stopped in the log:\n%s", app.logs.String())
		}
		if resp, err := app.client.Get(adminBase + "/healthz"); err == nil {
			resp.Body.Close()
			t.Errorf("the admin listener answers %s after serve returned", resp.Status)
		}
	})
}

var adminListening = regexp.MustCompile(`msg="admin listening" addr=(\S+)`)

// adminStart runs `app serve` with env, which sets ADMIN_ADDR, until the
// test ends, and returns once the admin listener listens: the app (whose
// base is the API's, if it serves one) and the admin listener's base URL.
func adminStart(t *testing.T, env map[string]string) (*e2eApp, string) {
	t.Helper()
	if env["API"] != "false" {
		app := e2eStart(t, env)
		<-app.logs.seen(`msg="admin listening"`)
		return app, "http://" + adminListening.FindStringSubmatch(app.logs.String())[1]
	}
	ctx, cancel := context.WithCancel(t.Context())
	app := &e2eApp{client: &http.Client{Timeout: e2eWait}, cancel: cancel, done: make(chan error, 1), logs: newE2ELogs()}
	go func() { app.done <- run(ctx, []string{"serve"}, getenv(env), io.Discard, app.logs) }()
	t.Cleanup(func() {
		if !app.returned {
			cancel()
			<-app.done
		}
		if t.Failed() {
			t.Logf("app logs:\n%s", app.logs.String())
		}
	})
	select {
	case <-app.logs.seen(`msg="admin listening"`):
	case err := <-app.done:
		app.returned = true
		t.Fatalf("serve returned before it listened: %v", err)
	case <-time.After(e2eWait):
		t.Fatalf("serve did not log its admin listener within %s", e2eWait)
	}
	return app, "http://" + adminListening.FindStringSubmatch(app.logs.String())[1]
}

// adminExpect gets url and fails t unless the answer has status and, when
// want is not empty, contains want.
func adminExpect(t *testing.T, c *http.Client, url string, status int, want string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status || !strings.Contains(string(body), want) {
		t.Errorf("GET %s: %s %.300s; want %d with %q", url, resp.Status, body, status, want)
	}
}
