package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

const alertRules = "../../deploy/prometheus/alerts.yml"

// The shipped Prometheus alert rules (deploy/prometheus/alerts.yml).
func TestAlertRules(t *testing.T) {
	t.Parallel()
	// The shipped alert rules pass promtool's check, and its unit tests show
	// each alert firing on a synthetic series (deploy/prometheus/alerts_test.yml);
	// the configuration of the compose file's Prometheus, which loads the
	// rules, passes its check too.
	// promtool comes with Debian's package prometheus, which scripts/test installs.
	t.Run("PassPromtool", func(t *testing.T) {
		t.Parallel()
		promtool, err := exec.LookPath("promtool")
		if err != nil {
			t.Fatalf("%v (Debian's package prometheus provides it)", err)
		}
		for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}, {"check", "config", "prometheus.yml"}} {
			cmd := exec.CommandContext(t.Context(), promtool, args...)
			cmd.Dir = filepath.Dir(alertRules)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
	// Every metric the alert rules read is one the app serves, and every alert
	// has its runbook in docs/operations.md.
	t.Run("ReadMetricsTheAppServes", func(t *testing.T) {
		t.Parallel()
		rules, err := os.ReadFile(alertRules)
		if err != nil {
			t.Fatal(err)
		}
		mx := smtptest.NewServer(t)
		app := e2eStart(t, map[string]string{
			"DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "accounts.db"),
			"HTTP_ADDR":    "127.0.0.1:0",
			"SMTP_URL":     mx.URL(),
		})
		used := regexp.MustCompile(`\b(?:outbox|projections|http_server|mail)_[a-z_]+\b`).FindAllString(string(rules), -1)
		slices.Sort(used)
		used = slices.Compact(used)
		// The projections' gauges appear once their runner has read the
		// registry, a moment after the start: scrape until every series is
		// there, for at most e2eWait.
		var missing []string
		deadline := time.Now().Add(e2eWait)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			resp, err := app.client.Get(app.base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			missing = missing[:0]
			for _, name := range used {
				if !regexp.MustCompile(`(?m)^` + name + `[{ ]`).Match(body) {
					missing = append(missing, name)
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
			<-tick.C
		}
		app.stop(t)
		for _, name := range missing {
			t.Errorf("the rules read %s, which /metrics does not serve", name)
		}
		runbook, err := os.ReadFile("../../docs/operations.md")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`alert: (\w+)`).FindAllStringSubmatch(string(rules), -1) {
			if !strings.Contains(string(runbook), "### "+m[1]+"\n") {
				t.Errorf("docs/operations.md has no section for %s", m[1])
			}
		}
		// Each runbook_url ends in the anchor of a heading of the runbook,
		// as GitHub and most renderers make it.
		anchors := map[string]bool{}
		for _, h := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(runbook), -1) {
			slug := regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(strings.ToLower(h[1]), "")
			anchors[strings.ReplaceAll(slug, " ", "-")] = true
		}
		alerts := regexp.MustCompile(`alert: \w+`).FindAllString(string(rules), -1)
		links := regexp.MustCompile(`runbook_url: .*operations\.md(?:\{\{ end \}\})?#([^'"\s]+)`).FindAllStringSubmatch(string(rules), -1)
		if len(links) != len(alerts) {
			t.Errorf("%d alerts, %d runbook_url annotations into docs/operations.md; want one each", len(alerts), len(links))
		}
		for _, l := range links {
			if !anchors[l[1]] {
				t.Errorf("runbook_url anchor #%s is no heading of docs/operations.md", l[1])
			}
		}
	})
}
