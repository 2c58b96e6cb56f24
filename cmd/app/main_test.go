package main

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// asAppEnv makes the test binary act as the app: tests that start
// instances as processes (the soak) run this binary, race detector and
// all, with the app's arguments.
const asAppEnv = "ACCOUNTS_TEST_BINARY_IS_APP"

func TestMain(m *testing.M) {
	if os.Getenv(asAppEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			os.Stderr.WriteString("app: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// getenv returns a getenv over m.
func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// testDataKey is a DATA_KEY for the tests that serve on PostgreSQL, which
// needs one.
const testDataKey = "test:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"

// runApp runs the app with args and environment and returns its output.
func runApp(t *testing.T, ctx context.Context, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, getenv(env), &stdout, &stderr)
	if t.Failed() || err != nil {
		t.Logf("app %s: stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	return stdout.String(), err
}

// testDatabases make a new, empty database for each backend, by name, as a
// DATABASE_URL.
var testDatabases = map[string]func(t *testing.T) string{
	"postgres": func(t *testing.T) string { return pgtest.NewURL(t) },
	"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "accounts.db") },
}
