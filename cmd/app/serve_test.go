package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

func TestMigrateThenServeUntilCancelled(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": pgtest.NewURL(t), "HTTP_ADDR": "127.0.0.1:0", "DATA_KEY": testDataKey, "SMTP_URL": smtptest.NewServer(t).URL()}
	out, err := runApp(t, t.Context(), env, "migrate")
	if err != nil || !strings.Contains(out, "up to date") {
		t.Fatalf("migrate: %q, %v", out, err)
	}
	out, err = runApp(t, t.Context(), env, "projections", "rebuild", "views")
	if err != nil || out != "rebuilt the user views from 0 events\nrebuilt the organizations' views from 0 events\n" {
		t.Fatalf("projections rebuild on an empty log: %q, %v", out, err)
	}
	out, err = runApp(t, t.Context(), env, "projections", "status")
	if err != nil || !statusTable("1", "0", `0\.0s`, "running").MatchString(out) {
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
