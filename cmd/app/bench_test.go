package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/publish/natsbroker/natstest"
)

var publishSummary = regexp.MustCompile(`\npublish: (\d+) messages in \d+\.\d\ds, (\d+) msgs/s\n$`)

// Every benchmark prints its one summary line last.
func TestBenchmarks(t *testing.T) {
	t.Parallel()
	t.Run("RelayAndAPIEndWithTheirSummaryLine", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DATABASE_URL": pgtest.URL()}
		for _, tc := range []struct {
			args []string
			want *regexp.Regexp
		}{
			{[]string{"bench", "drain", "--messages", "300"},
				regexp.MustCompile(`\ndrain: 300 messages in \d+\.\d\ds, \d+ msgs/s\n$`)},
			{[]string{"bench", "latency", "--rate", "100", "--duration", "300ms"},
				regexp.MustCompile(`\nlatency: rate=100/s n=30 p50=\d+\.\dms p90=\d+\.\dms p99=\d+\.\dms max=\d+\.\dms\n$`)},
			{[]string{"bench", "latency", "--rate", "100", "--duration", "300ms", "--closed-loop"},
				regexp.MustCompile(`\nlatency: sent 30 in \d+\.\d\ds, \d+/s\n(?:.*\n)*latency: rate=100/s n=30 p50=\d+\.\dms p90=\d+\.\dms p99=\d+\.\dms max=\d+\.\dms\n$`)},
			{[]string{"bench", "signin", "--duration", "300ms", "--concurrency", "2"},
				regexp.MustCompile(`\nsignin: [1-9]\d* requests in \d+\.\d\ds, \d+ req/s, p50=\d+\.\dms p99=\d+\.\dms\n$`)},
		} {
			out, err := runApp(t, t.Context(), env, tc.args...)
			if err != nil {
				t.Fatalf("%v: %v", tc.args, err)
			}
			if !tc.want.MatchString(out) {
				t.Errorf("%v printed %q, want a last line matching %s", tc.args, out, tc.want)
			}
		}
	})
	t.Run("TraceSinkTakesTheSpans", func(t *testing.T) {
		t.Parallel()
		sink := regexp.MustCompile(`msg="trace sink" exports=[1-9]\d* bytes=\d{4,} spans=(\d+)\b`)
		// bench runs args with --trace-sink and returns its summary line
		// and the count of spans the sink took.
		bench := func(t *testing.T, args ...string) (summary string, spans int) {
			t.Helper()
			var stdout, stderr bytes.Buffer
			args = append([]string{"bench"}, append(args, "--trace-sink")...)
			if err := run(t.Context(), args, getenv(map[string]string{"DATABASE_URL": pgtest.URL()}), &stdout, &stderr); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, stderr.String())
			}
			got := sink.FindStringSubmatch(stderr.String())
			if got == nil {
				t.Fatalf("%v logged %q, want the sink's counts", args, stderr.String())
			}
			spans, _ = strconv.Atoi(got[1])
			return stdout.String(), spans
		}
		t.Run("Drain", func(t *testing.T) {
			t.Parallel()
			out, spans := bench(t, "drain", "--messages", "200")
			if !strings.Contains(out, "\ndrain: 200 messages in ") || spans != 200 {
				t.Errorf("printed %q and exported %d spans, want its summary and a span per delivery", out, spans)
			}
		})
		t.Run("SignIn", func(t *testing.T) {
			t.Parallel()
			out, spans := bench(t, "signin", "--duration", "300ms", "--concurrency", "2")
			m := regexp.MustCompile(`\nsignin: (\d+) requests`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("printed %q, want its summary", out)
			}
			// The request's, the command's and at least one statement's.
			if n, _ := strconv.Atoi(m[1]); spans < 3*n {
				t.Errorf("%d spans for %d requests, want at least 3 each", spans, n)
			}
		})
	})
	t.Run("GrowthEndsWithItsSummaryLine", func(t *testing.T) {
		t.Parallel()
		summary := regexp.MustCompile(`\n {2,}figure {2,}empty {2,}grown {2,}grown/empty *\n(?:.*\n)+growth: events=3000 signin=\d+\.\d\dx drain=\d+\.\d\dx rebuild=\d+ ev/s bytes/event=[1-9]\d*\n$`)
		for name, url := range map[string]string{
			"PostgreSQL": pgtest.URL(),
			"SQLite":     "sqlite:" + filepath.Join(t.TempDir(), "unused.db"),
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				out, err := runApp(t, t.Context(), map[string]string{"DATABASE_URL": url}, "bench", "growth", "--events", "3000",
					"--duration", "300ms", "--concurrency", "2", "--messages", "200", "--catch-up", "300", "--samples", "20")
				if err != nil {
					t.Fatal(err)
				}
				if !summary.MatchString(out) {
					t.Errorf("bench growth printed %q, want its table and a last line matching %s", out, summary)
				}
			})
		}
	})
	t.Run("InviteEndsWithItsSummaryLine", func(t *testing.T) {
		t.Parallel()
		ms := `\s+\d+\.\dms`
		var table strings.Builder
		table.WriteString(`step\s+p50\s+p90\s+p99\s+max\n`)
		for _, step := range []string{"invite", "invitation mail", "sign-in link", "sign-in mail", "session", "accept", "round"} {
			table.WriteString(regexp.QuoteMeta(step) + strings.Repeat(ms, 4) + `\n`)
		}
		summary := regexp.MustCompile(`\ninvite: set up 10 organizations, each with its owner, in \d+\.\d\ds\n` + table.String() +
			`invite: [1-9]\d* rounds in \d+\.\d\ds, \d+ rounds/s, p50=\d+\.\dms p99=\d+\.\dms\n$`)
		for name, url := range map[string]string{
			"PostgreSQL": pgtest.URL(),
			"SQLite":     "sqlite:" + filepath.Join(t.TempDir(), "unused.db"),
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				out, err := runApp(t, t.Context(), map[string]string{"DATABASE_URL": url},
					"bench", "invite", "--duration", "300ms", "--concurrency", "2", "--orgs", "10")
				if err != nil {
					t.Fatal(err)
				}
				if !summary.MatchString(out) {
					t.Errorf("bench invite printed %q, want its table and a last line matching %s", out, summary)
				}
			})
		}
		// An organization sends the invitations its window allows, 20,
		// and no more: then the benchmark says to set up more of them,
		// rather than failing on the 21st invitation's 429.
		t.Run("OrganizationsRunOut", func(t *testing.T) {
			t.Parallel()
			_, err := runApp(t, t.Context(), map[string]string{"DATABASE_URL": pgtest.URL()},
				"bench", "invite", "--duration", "1m", "--concurrency", "1", "--orgs", "1")
			if err == nil || !strings.Contains(err.Error(), "the 1 organizations sent their 20 invitations each") {
				t.Errorf("bench invite with one organization for a minute returned %v, want it to run out of organizations after 20 rounds", err)
			}
		})
	})
	t.Run("ProjectionEndsWithItsSummaryLine", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "unused.db")}
		for _, tc := range []struct {
			args []string
			want *regexp.Regexp
		}{
			{[]string{"bench", "projection", "--events", "700"},
				regexp.MustCompile(`\nprojection: 700 events in \d+\.\d\ds, \d+ events/s\n$`)},
			{[]string{"bench", "projection", "--lag", "--rate", "100", "--duration", "300ms", "--poll", "10ms"},
				regexp.MustCompile(`\nprojection lag: rate=100/s n=30 p50=\d+\.\dms p90=\d+\.\dms p99=\d+\.\dms max=\d+\.\dms\n$`)},
		} {
			out, err := runApp(t, t.Context(), env, tc.args...)
			if err != nil {
				t.Fatalf("%v: %v", tc.args, err)
			}
			if !tc.want.MatchString(out) {
				t.Errorf("%v printed %q, want a last line matching %s", tc.args, out, tc.want)
			}
		}
	})
	// TestPublishBenchmarkEndsWithItsSummaryLine runs `app bench publish`
	// against a NATS server of its own.
	t.Run("PublishEndsWithItsSummaryLine", func(t *testing.T) {
		t.Parallel()
		srv := natstest.Start(t)
		out, err := runApp(t, t.Context(), map[string]string{"DATABASE_URL": pgtest.URL(), "BROKER_URL": srv.URL},
			"bench", "publish", "--messages", "300", "--users", "30")
		if err != nil {
			t.Fatal(err)
		}
		if m := publishSummary.FindStringSubmatch(out); m == nil || m[1] != "300" {
			t.Errorf("bench publish printed %q, want a last line matching %s", out, publishSummary)
		}
	})
}

// BenchmarkPublish runs `app bench publish`, as an operator would, against
// each kind of destination on this machine: the NATS server on
// 127.0.0.1:4222 (as the README's command does), an in-process Kafka
// cluster (kfake) and a webhook receiver that verifies every signature. It
// reports the command's own figure; run it with -benchtime=1x.
//
//	go test -run '^$' -bench BenchmarkPublish -benchtime=1x ./cmd/app/
func BenchmarkPublish(b *testing.B) {
	kafka, err := kfake.NewCluster(kfake.SeedTopics(16, "bench.user"))
	if err != nil {
		b.Fatal(err)
	}
	defer kafka.Close()
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hooks.Close()
	for name, dest := range map[string]map[string]string{
		"nats":    {"BROKER_URL": "nats://127.0.0.1:4222"},
		"kafka":   {"BROKER_URL": "kafka://" + kafka.ListenAddrs()[0]},
		"webhook": {"WEBHOOK_URL": hooks.URL, "WEBHOOK_SECRET": webhookSecret},
	} {
		b.Run(name, func(b *testing.B) {
			env := map[string]string{"DATABASE_URL": pgtest.URL(), "BROKER_SUBJECT_PREFIX": "bench.", "OUTBOX_BATCH": "500"}
			for k, v := range dest {
				env[k] = v
			}
			for b.Loop() {
				var out, errs bytes.Buffer
				if err := run(context.Background(), []string{"bench", "publish", "--messages", "50000"}, getenv(env), &out, &errs); err != nil {
					b.Fatalf("%v\n%s", err, errs.String())
				}
				m := publishSummary.FindStringSubmatch(out.String())
				if m == nil {
					b.Fatalf("no summary line in %q", out.String())
				}
				rate, _ := strconv.ParseFloat(m[2], 64)
				b.ReportMetric(rate, "msgs/s")
			}
		})
	}
}
