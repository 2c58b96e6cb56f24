package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With SMTP_URL unset, mail is printed on the terminal when standard
// output is one, and otherwise goes nowhere: it is retried, and neither
// standard output nor the log holds the address or a link.
func TestMailWithoutSMTPGoesToATerminalOrNowhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		terminal bool
	}{{"OnATerminal", true}, {"WithoutATerminal", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout io.Writer = &bytes.Buffer{}
			var screen *terminal
			if tc.terminal {
				screen = openTerminal(t)
				stdout = screen.TTY
			}
			logs := newE2ELogs()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"serve"}, getenv(map[string]string{
					"DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "accounts.db"),
					"HTTP_ADDR":    "127.0.0.1:0",
				}), stdout, logs)
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
			retried := logs.seen(`msg="outbox: delivery failed, will retry"`)
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
			if tc.terminal {
				code := waitForCode(t, screen)
				if !strings.Contains(screen.String(), "ada.console@example.com") {
					t.Errorf("the terminal shows no recipient:\n%s", screen.String())
				}
				e2eAwait(t, logs.seen(`msg="mail: delivered"`), "the delivery's log line")
				if strings.Contains(logs.String(), code) {
					t.Errorf("the log holds the code:\n%s", logs.String())
				}
			} else {
				e2eAwait(t, retried, "the mail's retry")
				for _, want := range []string{"standard output is no terminal: no mail is sent", "SMTP_URL is unset and there is no terminal to print it on"} {
					if !strings.Contains(logs.String(), want) {
						t.Errorf("the log lacks %q:\n%s", want, logs.String())
					}
				}
				if out := stdout.(*bytes.Buffer).String(); out != "" {
					t.Errorf("standard output, no terminal, shows %q", out)
				}
			}
			if strings.Contains(logs.String(), "ada.console") || strings.Contains(logs.String(), "code=") {
				t.Errorf("the log holds the address or a link:\n%s", logs.String())
			}
		})
	}
}
