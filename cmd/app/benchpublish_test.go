package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eventsourced/accounts/internal/integration/natsbroker/natstest"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

var publishSummary = regexp.MustCompile(`\npublish: (\d+) messages in \d+\.\d\ds, (\d+) msgs/s\n$`)

// TestPublishBenchmarkEndsWithItsSummaryLine runs `app bench publish`
// against a NATS server of its own.
func TestPublishBenchmarkEndsWithItsSummaryLine(t *testing.T) {
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
