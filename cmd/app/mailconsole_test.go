package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With SMTP_URL unset, `app serve` prints mail on the terminal when
// standard output is one, and otherwise does not start: its relay could
// only claim each mail and bury it. Neither standard output nor the log
// holds the address or a link.
func TestMailWithoutSMTP(t *testing.T) {
	t.Parallel()
	t.Run("ServePrintsItOnATerminal", func(t *testing.T) {
		t.Parallel()
		screen := openTerminal(t)
		logs := newE2ELogs()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"serve"}, getenv(map[string]string{
				"DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "accounts.db"),
				"HTTP_ADDR":    "127.0.0.1:0",
			}), screen.TTY, logs)
		}()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}()
		var base string
		select {
		case addr := <-logs.listening:
			base = "http://" + addr
		case err := <-done:
			t.Fatalf("serve returned: %v\n%s", err, logs.String())
		case <-time.After(e2eWait):
			t.Fatalf("serve did not listen:\n%s", logs.String())
		}
		resp, err := http.Post(base+"/v1/sign-in-links", "application/json", strings.NewReader(`{"email":"ada.console@example.com"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		code := waitForCode(t, screen)
		if !strings.Contains(screen.String(), "ada.console@example.com") {
			t.Errorf("the terminal shows no recipient:\n%s", screen.String())
		}
		e2eAwait(t, logs.seen(`msg="mail: printed"`), "the log line of the printed mail")
		if strings.Contains(logs.String(), code) || strings.Contains(logs.String(), "ada.console") {
			t.Errorf("the log holds the address or the code:\n%s", logs.String())
		}
	})
	t.Run("ServeRefusesToStartWithoutATerminal", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "accounts.db")
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), []string{"serve"}, getenv(map[string]string{
			"DATABASE_URL": "sqlite:" + path,
			"HTTP_ADDR":    "127.0.0.1:0",
		}), &stdout, &stderr)
		if !errors.Is(err, errNoMailServer) {
			t.Fatalf("serve without SMTP_URL or a terminal: %v, want errNoMailServer", err)
		}
		for _, want := range []string{"set SMTP_URL", "terminal", "RELAY=false"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not say %q: %v", want, err)
			}
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("serve refused to start, yet made its database: %v", err)
		}
		if stdout.Len() != 0 {
			t.Errorf("standard output, no terminal, shows %q", stdout.String())
		}
	})
}
