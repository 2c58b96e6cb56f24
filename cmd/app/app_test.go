package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// getenv returns a getenv over m.
func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// runApp runs the app with args and environment and returns its output.
// testDataKey is a DATA_KEY for the tests that serve on PostgreSQL, which
// needs one.
const testDataKey = "test:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"

func runApp(t *testing.T, ctx context.Context, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, getenv(env), &stdout, &stderr)
	if t.Failed() || err != nil {
		t.Logf("app %s: stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	return stdout.String(), err
}

func TestConfigListsEveryVariableWithItsDefault(t *testing.T) {
	t.Parallel()
	out, err := runApp(t, t.Context(), nil, "config", "--defaults")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^DATABASE_URL\s+-\s+\S`),
		regexp.MustCompile(`(?m)^OUTBOX_BATCH\s+10\s+Messages claimed per poll\.$`),
		regexp.MustCompile(`(?m)^OUTBOX_LEASE\s+2m\s+`),
		regexp.MustCompile(`(?m)^OUTBOX_MAX_ATTEMPTS\s+8\s+`),
		regexp.MustCompile(`(?m)^HTTP_ADDR\s+127\.0\.0\.1:8080\s+Listen address of the HTTP API; the default is loopback only`),
		regexp.MustCompile(`(?m)^SHUTDOWN_GRACE\s+25s\s+Longest a stop may take`),
		regexp.MustCompile(`(?m)^SHUTDOWN_DELAY\s+0s\s+`),
	} {
		if !want.MatchString(out) {
			t.Errorf("app config output lacks %s:\n%s", want, out)
		}
	}
}

// app config shows each value in effect and where it comes from, never a
// secret or a password.
func TestConfigShowsTheValuesInEffectWithSecretsMasked(t *testing.T) {
	t.Parallel()
	out, err := runApp(t, t.Context(), map[string]string{
		"OUTBOX_BATCH":   "500",
		"DATABASE_URL":   "postgres://ops:hunter2@db.example.com:5432/accounts",
		"SMTP_URL":       "smtp://mailer:hunter2@smtp.example.com:587",
		"WEBHOOK_SECRET": "whsec_hunter2hunter2hunter2hunter2",
		"BROKER_URL":     "nats://ops:hunter2@[broken",
	}, "config")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("app config shows a secret:\n%s", out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^OUTBOX_BATCH\s+500\s+environment\s+Messages claimed per poll\.$`),
		regexp.MustCompile(`(?m)^OUTBOX_LEASE\s+2m\s+default\s+`),
		regexp.MustCompile(`(?m)^DATABASE_URL\s+postgres://ops:xxxxx@db\.example\.com:5432/accounts\s+environment\s+`),
		regexp.MustCompile(`(?m)^WEBHOOK_SECRET\s+\*+\s+environment\s+`),
	} {
		if !want.MatchString(out) {
			t.Errorf("app config output lacks %s:\n%s", want, out)
		}
	}
}

// LOG_FORMAT=json writes each log line as one JSON object.
func TestLogFormatJSON(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	env := map[string]string{"DATABASE_URL": pgtest.NewURL(t), "LOG_FORMAT": "json"}
	if err := run(t.Context(), []string{"migrate"}, getenv(env), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	for _, l := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(l), &entry); err != nil || entry["msg"] == nil || entry["level"] == nil {
			t.Errorf("log line %q is not a JSON entry: %v", l, err)
		}
	}
	if !strings.Contains(stderr.String(), `"msg":"migrated database"`) {
		t.Errorf("no migration logged:\n%s", stderr.String())
	}
}

// A DATABASE_URL that is wrong or leads nowhere is named in the error,
// its password masked, and the driver's error is said once.
func TestDatabaseURLErrorsNameTheVariableAndHideThePassword(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"mysql://u:s3cret@x/db",
		"mysql://u:s3cret@[x/db",
		"postgres://u:s3cret@127.0.0.1:1/x?sslmode=prefer&connect_timeout=5",
	} {
		_, err := runApp(t, t.Context(), map[string]string{"DATABASE_URL": raw}, "migrate")
		if err == nil {
			t.Errorf("%s: migrate succeeded", raw)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "DATABASE_URL") || strings.Contains(msg, "s3cret") {
			t.Errorf("%s: error %q, want one that names DATABASE_URL without the password", raw, msg)
		}
		lines := strings.Split(msg, "\n")
		for i := 1; i < len(lines); i++ {
			if lines[i] == lines[i-1] {
				t.Errorf("%s: error repeats the line %q", raw, lines[i])
			}
		}
	}
}

// -h on any command prints its usage, with its own flags only, and does
// nothing; what a command cannot take is a usage error, said once, after
// the command's usage.
func TestCommandLineNeverSurprises(t *testing.T) {
	t.Parallel()
	// A database that does not exist: a command that ran would fail.
	env := map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:1/none?connect_timeout=1"}
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"help"}, {"help", "outbox"}, {"migrate", "-h"}, {"serve", "--help"},
		{"outbox", "drain", "-h"}, {"outbox", "requeue", "-h"}, {"projections", "rebuild", "activity", "-h"},
		{"bench", "latency", "-h"}, {"bench", "publish", "--help"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), args, getenv(env), &stdout, &stderr); err != nil {
			t.Errorf("app %s: %v", strings.Join(args, " "), err)
		}
		if !strings.Contains(stdout.String(), "Usage:") || stderr.Len() != 0 {
			t.Errorf("app %s printed %q and %q, want its usage on stdout alone", strings.Join(args, " "), stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	_ = run(t.Context(), []string{"bench", "latency", "-h"}, getenv(env), &stdout, &stderr)
	if h := stdout.String(); !strings.Contains(h, "--rate") || strings.Contains(h, "--messages") || strings.Contains(h, "--users") {
		t.Errorf("bench latency -h lists other benchmarks' flags:\n%s", h)
	}
	for _, args := range [][]string{
		{"serve", "extra"}, {"outbox", "buried", "extra"}, {"outbox", "drain", "--bogus"}, {"bogus"},
		{"outbox"}, {"outbox", "requeue"}, {"bench"}, {"bench", "drain", "--messages", "ten"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), args, getenv(env), &stdout, &stderr)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("app %s: %v, want a usage error", strings.Join(args, " "), err)
			continue
		}
		if !strings.Contains(stderr.String(), "Usage:") || strings.Contains(stderr.String(), err.Error()) {
			t.Errorf("app %s: stderr %q, want the usage, and the error once (main prints it)", strings.Join(args, " "), stderr.String())
		}
	}
	if _, err := runApp(t, t.Context(), env, "outbox", "requeue"); err == nil || !strings.Contains(err.Error(), "--all") {
		t.Errorf("outbox requeue with nothing: %v, want it to say what to give", err)
	}
}

// The commands that only read refuse a SQLite file that does not exist
// rather than make and migrate one.
func TestReadOnlyCommandsDoNotCreateADatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing.db")
	for _, args := range [][]string{{"outbox", "buried"}, {"projections", "status"}} {
		_, err := runApp(t, t.Context(), map[string]string{"DATABASE_URL": "sqlite:" + path}, args...)
		if err == nil || !strings.Contains(err.Error(), "no database at "+path) {
			t.Errorf("app %s on a missing file: %v, want an error that says so", strings.Join(args, " "), err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("app %s made %s", strings.Join(args, " "), path)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := runApp(t, t.Context(), nil, args...)
		if err != nil || !strings.HasPrefix(out, "app ") || !strings.Contains(out, "go1.") {
			t.Errorf("app %s: %q, %v; want the version and the Go it was built with", args[0], out, err)
		}
	}
}

func TestConfigThatCannotWorkStopsTheStart(t *testing.T) {
	t.Parallel()
	_, err := runApp(t, t.Context(), map[string]string{
		"DATABASE_URL": pgtest.URL(), "OUTBOX_LEASE": "10s", "OUTBOX_TIMEOUT": "30s",
	}, "serve")
	if err == nil || !strings.Contains(err.Error(), "OUTBOX_LEASE") {
		t.Errorf("serve with a lease shorter than the timeout: %v, want an error naming OUTBOX_LEASE", err)
	}
}

func TestUnknownCommandIsAnError(t *testing.T) {
	t.Parallel()
	if _, err := runApp(t, t.Context(), nil, "frobnicate"); err == nil {
		t.Error("unknown command accepted")
	}
}

func TestMigrateThenServeUntilCancelled(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": pgtest.NewURL(t), "HTTP_ADDR": "127.0.0.1:0", "DATA_KEY": testDataKey}
	out, err := runApp(t, t.Context(), env, "migrate")
	if err != nil || !strings.Contains(out, "up to date") {
		t.Fatalf("migrate: %q, %v", out, err)
	}
	out, err = runApp(t, t.Context(), env, "projections", "rebuild", "views")
	if err != nil || out != "rebuilt the user views from 0 events\n" {
		t.Fatalf("projections rebuild on an empty log: %q, %v", out, err)
	}
	out, err = runApp(t, t.Context(), env, "projections", "status")
	if err != nil || out != "activity\tversion 1\tbehind 0 events, 0.0s\trunning\n" {
		t.Fatalf("projections status on an empty log: %q, %v", out, err)
	}
	out, err = runApp(t, t.Context(), env, "outbox", "drain")
	if err != nil || out != "claimed 0, delivered 0, retried 0, buried 0\n" {
		t.Fatalf("outbox drain on an empty outbox: %q, %v", out, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	logs := &signalWriter{want: "relay running", seen: make(chan struct{})}
	go func() { done <- run(ctx, []string{"serve"}, getenv(env), io.Discard, logs) }()
	select {
	case <-logs.seen:
	case err := <-done:
		t.Fatalf("serve stopped before it ran: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
}

// signalWriter closes seen once a write contains want.
type signalWriter struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.want)) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func TestBenchmarksEndWithTheirSummaryLine(t *testing.T) {
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
}

func TestProjectionBenchmarksEndWithTheirSummaryLine(t *testing.T) {
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
}

// `app projections rebuild activity` switches reads to a new version and
// says so; `status` then shows that version alone; progress lines go to
// stderr, which is no terminal here. An unknown name, or none, is an error
// that names the projections.
func TestProjectionsRebuildActivity(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(t *testing.T) string{
		"postgres": func(t *testing.T) string { return pgtest.NewURL(t) },
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "accounts.db") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"DATABASE_URL": url(t), "DATA_KEY": testDataKey}
			if _, err := runApp(t, t.Context(), env, "migrate"); err != nil {
				t.Fatal(err)
			}
			for version := 2; version <= 3; version++ {
				var stdout, stderr bytes.Buffer
				if err := run(t.Context(), []string{"projections", "rebuild", "activity"}, getenv(env), &stdout, &stderr); err != nil {
					t.Fatalf("rebuild: %v\n%s", err, stderr.String())
				}
				want := fmt.Sprintf("rebuilt activity: version %d serves reads; version %d is dropped\n", version, version-1)
				if stdout.String() != want {
					t.Errorf("rebuild said %q, want %q", stdout.String(), want)
				}
				if line := fmt.Sprintf("activity version %d: 0 of 0 events applied\n", version); !strings.Contains(stderr.String(), line) {
					t.Errorf("stderr lacks the progress line %q:\n%s", line, stderr.String())
				}
				out, err := runApp(t, t.Context(), env, "projections", "status")
				if want := fmt.Sprintf("activity\tversion %d\tbehind 0 events, 0.0s\trunning\n", version); err != nil || out != want {
					t.Errorf("status: %q, %v; want %q", out, err, want)
				}
			}
			for _, args := range [][]string{{"projections", "rebuild"}, {"projections", "rebuild", "nope"}} {
				var ue *usageError
				if _, err := runApp(t, t.Context(), env, args...); !errors.As(err, &ue) || !strings.Contains(err.Error(), "activity, views") {
					t.Errorf("app %s: %v, want a usage error that names the projections", strings.Join(args, " "), err)
				}
			}
		})
	}
}
