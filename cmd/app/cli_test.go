package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command line: usage, usage errors, the version, and the commands
// that only read.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	// -h on any command prints its usage, with its own flags only, and does
	// nothing; what a command cannot take is a usage error, said once, after
	// the command's usage.
	t.Run("NeverSurprises", func(t *testing.T) {
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
	})
	t.Run("UnknownCommandIsAnError", func(t *testing.T) {
		t.Parallel()
		if _, err := runApp(t, t.Context(), nil, "frobnicate"); err == nil {
			t.Error("unknown command accepted")
		}
	})
	t.Run("Version", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"version"}, {"--version"}} {
			out, err := runApp(t, t.Context(), nil, args...)
			if err != nil || !strings.HasPrefix(out, "app ") || !strings.Contains(out, "go1.") {
				t.Errorf("app %s: %q, %v; want the version and the Go it was built with", args[0], out, err)
			}
		}
	})
	// An operator's command says where the database is only at debug: its
	// output is what was asked for.
	t.Run("SaysWhereTheDatabaseIsAtDebug", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "accounts.db")}
		if _, err := runApp(t, t.Context(), env, "migrate"); err != nil {
			t.Fatal(err)
		}
		for level, want := range map[string]bool{"": false, "DEBUG": true} {
			env["LOG_LEVEL"] = level
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), []string{"outbox", "list"}, getenv(env), &stdout, &stderr); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(stderr.String(), `level=DEBUG msg="database open" backend=sqlite`); got != want || strings.Contains(stderr.String(), "level=INFO") {
				t.Errorf("outbox list with LOG_LEVEL=%q logged %q; want the database at debug only", level, stderr.String())
			}
		}
	})
	// The commands that only read refuse a SQLite file that does not exist
	// rather than make and migrate one.
	t.Run("ReadOnlyCommandsDoNotCreateADatabase", func(t *testing.T) {
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
	})
}
