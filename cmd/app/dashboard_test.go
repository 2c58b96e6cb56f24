package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/user/mail"
)

const dashboardFile = "../../deploy/grafana/dashboards/accounts.json"

// grafanaDashboard is what the test reads of a Grafana dashboard.
type grafanaDashboard struct {
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	// Panels are those of a collapsed row.
	Panels []grafanaPanel `json:"panels"`
}

// The shipped Grafana dashboard (deploy/grafana/dashboards/accounts.json).
func TestDashboard(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	// queries maps each query of the dashboard, a panel's or a variable's,
	// to where it is.
	queries := map[string]string{}
	ids := map[int]string{}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if other, ok := ids[p.ID]; ok {
				t.Errorf("panels %q and %q share the id %d", other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				queries[tg.Expr] = "panel " + p.Title
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		expr, _ := q["query"].(string)
		// label_values(SELECTOR, LABEL) is Grafana's, not PromQL: its
		// selector is.
		if m := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`).FindStringSubmatch(expr); m != nil {
			expr = m[1]
		}
		queries[expr] = "variable " + v.Name
	}
	used := map[string][]string{}
	for expr, where := range queries {
		names, err := promqlMetricNames(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
		}
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			if !slices.Contains(used[n], where) {
				used[n] = append(used[n], where)
			}
		}
	}

	// The dashboard shows what an operator looks at first: HTTP rate,
	// errors and latency; the outbox's backlog, breakers and delivery
	// latency; the projections' lag and state; the Go runtime.
	t.Run("ShowsWhatAnOperatorNeeds", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{
			"http_server_requests_total", "http_server_request_duration_seconds_bucket",
			"outbox_backlog_due", "outbox_backlog_buried", "outbox_oldest_due_age_seconds",
			"outbox_breaker_state", "outbox_delivery_duration_seconds_bucket",
			"projections_behind_seconds", "projections_state",
			"go_goroutines", "go_memstats_heap_inuse_bytes",
		} {
			if len(used[name]) == 0 {
				t.Errorf("no query of the dashboard reads %s", name)
			}
		}
	})

	// Every metric the dashboard's queries name is one that a real app's
	// /metrics serves, once it has answered a request, delivered a mail
	// and applied an event to a projection. It runs on PostgreSQL, as
	// deploy/compose.yaml does: only there does the relay report
	// outbox.wakeups.listening.
	t.Run("ReadsMetricsTheAppServes", func(t *testing.T) {
		t.Parallel()
		mx := smtptest.NewServer(t)
		app := e2eStart(t, e2eDatabases["PostgreSQL"](t).env(map[string]string{
			"DATA_KEY":  testDataKey,
			"HTTP_ADDR": "127.0.0.1:0",
			"SMTP_URL":  mx.URL(),
			"BASE_URL":  "http://accounts.test",
		}))
		app.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"ada@example.com"}`, http.StatusAccepted, nil)
		code := e2eLinkCode(t, mx.Wait(t, 1, e2eWait)[0], "http://accounts.test/sign-in?code=")
		// The first sign-in registers the user: events the activity
		// projection applies.
		app.expect(t, "POST", "/v1/sessions", "", e2eJSON(t, map[string]string{"code": code}), http.StatusCreated, nil)
		app.awaitMetric(t, "outbox_delivered_total", mail.TopicLoginLink)

		// The projections' gauges appear once their runner has read the
		// log, and their histogram once it has applied an event: scrape
		// until every metric is there, for at most e2eWait.
		var missing []string
		deadline := time.Now().Add(e2eWait)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			served := scrapeNames(t, app.client, app.base+"/metrics")
			missing = missing[:0]
			for name := range used {
				if !served[name] {
					missing = append(missing, name)
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
			<-tick.C
		}
		app.stop(t)
		slices.Sort(missing)
		for _, name := range missing {
			t.Errorf("%s read %s, which /metrics does not serve", strings.Join(used[name], ", "), name)
		}
	})

	// promqlMetricNames takes the metric names out of PromQL and leaves
	// functions, keywords, labels, strings, durations and Grafana's
	// variables.
	t.Run("ReadsNamesOutOfPromQL", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			expr string
			want []string
		}{
			{`up`, []string{"up"}},
			{`sum by (topic) (rate(a_total{topic="x", le=~"b{1}|c"}[$__rate_interval]))`, []string{"a_total"}},
			{`sum by(topic)(rate(a_total[5m]))`, []string{"a_total"}},
			{`sum(rate(a_total[5m])) without (instance, job)`, []string{"a_total"}},
			{`histogram_quantile(0.99, sum by (le, http_route) (rate(h_bucket{instance=~"$instance"}[5m])))`, []string{"h_bucket"}},
			{`a / on (instance) group_left (topic) b`, []string{"a", "b"}},
			{`a and b or c unless d`, []string{"a", "b", "c", "d"}},
			{`a > bool 1e-3 * 2`, []string{"a"}},
			{`a offset 1h30m + b @ end()`, []string{"a", "b"}},
			{`max_over_time(rec:a:rate5m[1h:5m])`, []string{"rec:a:rate5m"}},
			{`topk(3, a) > Inf`, []string{"a"}},
			{`label_replace(a, "dst", "$1", "src", "(.*)") # a comment naming b`, []string{"a"}},
			{`sum by (x) (a) / ignoring (y) sum without (z) (b)`, []string{"a", "b"}},
			{`-a + ${metric_var} + NaN`, []string{"a"}},
		} {
			got, err := promqlMetricNames(c.expr)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("promqlMetricNames(%q) = %q, %v; want %q", c.expr, got, err, c.want)
			}
		}
		for _, bad := range []string{`rate(a[5m]`, `a{b="c"`, `a{b="c}`, `{__name__="a"}`, `a)`} {
			if got, err := promqlMetricNames(bad); err == nil {
				t.Errorf("promqlMetricNames(%q) = %q, nil; want an error", bad, got)
			}
		}
	})
}

// scrapeNames returns the names of the samples on /metrics at url, in the
// Prometheus text format: a histogram's _bucket, _sum and _count.
func scrapeNames(t *testing.T, c *http.Client, url string) map[string]bool {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for line := range strings.Lines(string(body)) {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// PromQL words that are no metric: the keywords, and the aggregation
// operators, which may be followed by "by" or "without" rather than "(".
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"sum": true, "avg": true, "min": true, "max": true, "count": true, "group": true,
	"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "quantile": true,
	"count_values": true, "limitk": true, "limit_ratio": true,
	"inf": true, "nan": true,
}

// promqlLabelLists are the keywords followed by a list of labels in
// parentheses.
var promqlLabelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// promqlMetricNames returns the metric names expr selects, in order and
// once each. It is a lexer rather than the Prometheus parser, which would
// bring the whole Prometheus module into go.mod for one test, and rather
// than a regular expression, which cannot tell a metric from a label in a
// by (...) list, a function, a keyword or a word inside a string: it skips
// strings, comments, label matchers {...} and ranges [...], the label
// lists after by, without, on, ignoring, group_left and group_right,
// numbers and durations, Grafana's $variables, and every word followed by
// "(" (a function or an aggregation) or that PromQL reserves. An
// expression it cannot read to its end, or that selects by __name__, is an
// error, so that a query it would misread fails the test instead.
func promqlMetricNames(expr string) ([]string, error) {
	var names []string
	isWord := func(c byte, first bool) bool {
		return c == '_' || c == ':' || 'a' <= c|0x20 && c|0x20 <= 'z' || !first && '0' <= c && c <= '9'
	}
	// skipString returns the index after the string that starts at i.
	skipString := func(i int) (int, error) {
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			switch {
			case expr[j] == '\\' && q != '`':
				j++
			case expr[j] == q:
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("%q: a string that does not end", expr)
	}
	// skipTo returns the index after the close that ends what starts at
	// i, stepping over strings.
	skipTo := func(i int, close byte) (int, error) {
		for j := i + 1; j < len(expr); j++ {
			switch c := expr[j]; {
			case c == '"' || c == '\'' || c == '`':
				end, err := skipString(j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case c == close:
				return j + 1, nil
			case close == '}' && strings.HasPrefix(expr[j:], "__name__"):
				return 0, fmt.Errorf("%q selects by __name__, which this reader does not follow", expr)
			}
		}
		return 0, fmt.Errorf("%q: an unclosed %c", expr, expr[i])
	}
	// next returns the index of the first character from i that is not
	// white space.
	next := func(i int) int {
		for i < len(expr) && strings.IndexByte(" \t\r\n", expr[i]) >= 0 {
			i++
		}
		return i
	}
	depth := 0
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '#':
			end := strings.IndexByte(expr[i:], '\n')
			if end < 0 {
				end = len(expr) - i
			}
			i += end
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipTo(i, map[byte]byte{'{': '}', '[': ']'}[c])
			if err != nil {
				return nil, err
			}
			i = end
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("%q: a ) that closes nothing", expr)
			}
			i++
		case c == '$':
			// A Grafana variable: $name or ${name}.
			i++
			if i < len(expr) && expr[i] == '{' {
				end, err := skipTo(i, '}')
				if err != nil {
					return nil, err
				}
				i = end
			}
			for i < len(expr) && isWord(expr[i], false) {
				i++
			}
		case '0' <= c && c <= '9' || c == '.':
			// A number or a duration: 0.99, 1e-3 (the - is an operator
			// then 3), 0x1f, 1h30m.
			for i < len(expr) && (isWord(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isWord(c, true):
			start := i
			for i < len(expr) && isWord(expr[i], false) {
				i++
			}
			word := expr[start:i]
			after := next(i)
			lower := strings.ToLower(word)
			switch {
			case promqlLabelLists[lower] && after < len(expr) && expr[after] == '(':
				end, err := skipTo(after, ')')
				if err != nil {
					return nil, err
				}
				i = end
			case promqlWords[lower], after < len(expr) && expr[after] == '(':
			case word == "__name__":
				return nil, fmt.Errorf("%q selects by __name__, which this reader does not follow", expr)
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
		default:
			i++
		}
	}
	if depth != 0 {
		return nil, errors.New(expr + ": an unclosed (")
	}
	return names, nil
}
