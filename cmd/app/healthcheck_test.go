package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// app healthcheck asks /readyz of the instance on this machine, on the
// admin listener when there is one, and fails unless it answers 200.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	t.Run("AsksTheRunningInstance", func(t *testing.T) {
		t.Parallel()
		app := e2eStart(t, map[string]string{
			"DATABASE_URL": testDatabases["sqlite"](t), "HTTP_ADDR": "127.0.0.1:0", "RELAY": "false",
		})
		addr := strings.TrimPrefix(app.base, "http://")
		out, err := runApp(t, t.Context(), map[string]string{"HTTP_ADDR": addr}, "healthcheck")
		if err != nil || out != "GET "+app.base+"/readyz: 200 OK\n" {
			t.Errorf("healthcheck of a ready instance: %q, %v", out, err)
		}
		app.stop(t)
		if _, err := runApp(t, t.Context(), map[string]string{"HTTP_ADDR": addr}, "healthcheck"); err == nil {
			t.Error("healthcheck of a stopped instance: passed")
		}
	})
	t.Run("PrefersTheAdminListener", func(t *testing.T) {
		t.Parallel()
		probe := func(status int) string {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/readyz" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(status)
				_, _ = w.Write([]byte("the database does not answer"))
			}))
			t.Cleanup(srv.Close)
			return strings.TrimPrefix(srv.URL, "http://")
		}
		ready, unready := probe(http.StatusOK), probe(http.StatusServiceUnavailable)
		if _, err := runApp(t, t.Context(), map[string]string{"HTTP_ADDR": unready, "ADMIN_ADDR": ready}, "healthcheck"); err != nil {
			t.Errorf("healthcheck with a ready admin listener: %v", err)
		}
		_, err := runApp(t, t.Context(), map[string]string{"HTTP_ADDR": ready, "ADMIN_ADDR": unready}, "healthcheck")
		if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "the database does not answer") {
			t.Errorf("healthcheck with an unready admin listener: %v, want its status and reason", err)
		}
		_, err = runApp(t, t.Context(), map[string]string{"API": "false"}, "healthcheck")
		if err == nil || !strings.Contains(err.Error(), "ADMIN_ADDR") {
			t.Errorf("healthcheck of a relay-only instance without ADMIN_ADDR: %v, want it to name ADMIN_ADDR", err)
		}
	})
}
