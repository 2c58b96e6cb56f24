package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// app config, LOG_FORMAT and DATABASE_URL: what the configuration shows,
// and what it refuses before anything starts.
func TestConfig(t *testing.T) {
	t.Parallel()
	t.Run("ListsEveryVariableWithItsDefault", func(t *testing.T) {
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
	})
	// app config shows each value in effect and where it comes from, never a
	// secret or a password.
	t.Run("ShowsTheValuesInEffectWithSecretsMasked", func(t *testing.T) {
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
	})
	t.Run("ThatCannotWorkStopsTheStart", func(t *testing.T) {
		t.Parallel()
		_, err := runApp(t, t.Context(), map[string]string{
			"DATABASE_URL": pgtest.URL(), "OUTBOX_LEASE": "10s", "OUTBOX_TIMEOUT": "30s",
		}, "serve")
		if err == nil || !strings.Contains(err.Error(), "OUTBOX_LEASE") {
			t.Errorf("serve with a lease shorter than the timeout: %v, want an error naming OUTBOX_LEASE", err)
		}
	})
	// A configuration that cannot work is refused before the database is
	// opened, with an error that names the variable: here the database
	// does not answer, and an error about it would hide the cause.
	t.Run("FoundBeforeTheDatabaseIsOpened", func(t *testing.T) {
		t.Parallel()
		unreachable := "postgres://postgres@127.0.0.1:1/none?connect_timeout=1"
		for _, tc := range []struct {
			env  map[string]string
			args []string
			name string
		}{
			{map[string]string{"HTTP_ADDR": "8080", "DATA_KEY": testDataKey}, []string{"serve"}, "HTTP_ADDR"},
			{map[string]string{"HTTP_ADDR": "localhost", "DATA_KEY": testDataKey}, []string{"outbox", "list"}, "HTTP_ADDR"},
			{nil, []string{"serve"}, "DATA_KEY"},
			{nil, []string{"keys", "rotate"}, "DATA_KEY"},
			{nil, []string{"projections", "rebuild", "views"}, "DATA_KEY"},
		} {
			// SMTP_URL, so that serve does not stop first for want of a way
			// to send mail.
			env := map[string]string{"DATABASE_URL": unreachable, "SMTP_URL": "smtp://127.0.0.1:1"}
			maps.Copy(env, tc.env)
			_, err := runApp(t, t.Context(), env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.name) || strings.Contains(err.Error(), "DATABASE_URL") {
				t.Errorf("app %s with %v: %v; want an error that names %s, not the database", strings.Join(tc.args, " "), tc.env, err, tc.name)
			}
		}
	})
	// LOG_FORMAT=json writes each log line as one JSON object.
	t.Run("LogFormatJSON", func(t *testing.T) {
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
	})
	// A DATABASE_URL that is wrong or leads nowhere is named in the error,
	// its password masked, and the driver's error is said once.
	t.Run("DatabaseURLErrorsNameTheVariableAndHideThePassword", func(t *testing.T) {
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
	})
}
