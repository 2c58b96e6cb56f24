package main

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// openMetrics is the Accept header of a Prometheus that scrapes
// exemplars.
const openMetrics = "application/openmetrics-text;version=1.0.0"

// A sign-in link request that comes with a sampled traceparent leaves, on
// /metrics in OpenMetrics, exemplars naming its trace on the request's
// duration and on its mail's delivery, when tracing is on, and the sign-in
// one of its projection batch's trace on the time to apply an event; with
// tracing off the same requests leave none, though the no-op tracer passes
// their traceparent on. Either way a scraper that asks for the Prometheus text
// format gets it. Tracing on sets the global tracer provider, so the test
// does not run in parallel.
func TestMetricsCarryExemplarsOfTraces(t *testing.T) {
	const traceID = "5bf92f3577b34da6a3ce929d0e0e4736"
	// signIn runs the app with the OTEL_ variables of vars, asks for a
	// link in trace traceID, waits for the mail's delivery to be counted,
	// signs in with the link's code, waits for the activity projection to
	// apply the sign-in, and returns /metrics in OpenMetrics.
	signIn := func(t *testing.T, vars map[string]string) string {
		t.Helper()
		mx := smtptest.NewServer(t)
		env := map[string]string{
			"DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "accounts.db"),
			"DATA_KEY":     testDataKey,
			"HTTP_ADDR":    "127.0.0.1:0",
			"SMTP_URL":     mx.URL(),
			"BASE_URL":     "http://accounts.test",
		}
		for k, v := range vars {
			env[k] = v
		}
		app := e2eStart(t, env)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, app.base+"/v1/sign-in-links", strings.NewReader(`{"email":"ada@example.com"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		resp, err := app.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST /v1/sign-in-links: %s, want 202", resp.Status)
		}
		code := e2eLinkCode(t, mx.Wait(t, 1, e2eWait)[0], "http://accounts.test/sign-in?code=")
		// In the Prometheus text format, which awaitMetric checks it is.
		app.awaitMetric(t, "outbox_delivered_total", mail.TopicLoginLink)
		app.expect(t, "POST", "/v1/sessions", "", e2eJSON(t, map[string]string{"code": code}), http.StatusCreated, nil)
		var body string
		deadline := time.Now().Add(e2eWait)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var ct string
			body, ct = scrape(t, app.client, app.base+"/metrics", openMetrics)
			if !strings.HasPrefix(ct, "application/openmetrics-text") || !strings.HasSuffix(body, "# EOF\n") {
				t.Fatalf("GET /metrics with Accept %s: %q, %.300s...; want OpenMetrics", openMetrics, ct, body)
			}
			if strings.Contains(body, "\nprojections_apply_duration_seconds_count{") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no projection applied an event within %s", e2eWait)
			}
			<-tick.C
		}
		if plain, ct := scrape(t, app.client, app.base+"/metrics", ""); !strings.HasPrefix(ct, "text/plain") || strings.Contains(plain, " # {") {
			t.Errorf("GET /metrics with no Accept: %q, exemplars %t; want the Prometheus text format, which has none", ct, strings.Contains(plain, " # {"))
		}
		app.stop(t)
		return body
	}
	route := `http_route="POST /v1/sign-in-links"`
	topic := `topic="` + mail.TopicLoginLink + `"`
	t.Run("OnNameTheTraceOfTheRequestAndOfItsDelivery", func(t *testing.T) {
		body := signIn(t, map[string]string{"OTEL_TRACES_EXPORTER": "console"})
		for _, want := range []struct{ name, label string }{
			{"http_server_request_duration_seconds_bucket", route},
			{"outbox_delivery_duration_seconds_bucket", topic},
		} {
			traces := exemplarTraces(body, want.name, want.label)
			if !strings.Contains(strings.Join(traces, " "), traceID) {
				t.Errorf("%s{%s}: exemplars of traces %q, want one of %s", want.name, want.label, traces, traceID)
			}
		}
		// A projection batch is a trace of its own.
		if traces := exemplarTraces(body, "projections_apply_duration_seconds_bucket", `projection="`); len(traces) == 0 || len(traces[0]) != 32 {
			t.Errorf("projections_apply_duration_seconds_bucket: exemplars of traces %q, want some", traces)
		}
	})
	t.Run("OffKeepNone", func(t *testing.T) {
		body := signIn(t, map[string]string{"OTEL_TRACES_EXPORTER": "none"})
		for line := range strings.Lines(body) {
			if strings.Contains(line, " # {") {
				t.Errorf("tracing off, /metrics has an exemplar: %s", line)
			}
		}
	})
}

// exemplarTrace finds the trace ID of an exemplar in OpenMetrics.
var exemplarTrace = regexp.MustCompile(`\btrace_id="([0-9a-f]+)"`)

// exemplarTraces returns the trace IDs of the exemplars of the samples of
// name whose labels hold label, in the OpenMetrics body: a sample's line
// ends in " # {" and the exemplar's labels.
func exemplarTraces(body, name, label string) []string {
	var ids []string
	for line := range strings.Lines(body) {
		sample, exemplar, ok := strings.Cut(line, " # {")
		if !ok || !strings.HasPrefix(sample, name+"{") || !strings.Contains(sample, label) {
			continue
		}
		if m := exemplarTrace.FindStringSubmatch(exemplar); m != nil {
			ids = append(ids, m[1])
		}
	}
	return ids
}

// scrape gets url with the Accept header accept (none when empty) and
// returns the body and its content type.
func scrape(t *testing.T, c *http.Client, url, accept string) (body, contentType string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(b), resp.Header.Get("Content-Type")
}
