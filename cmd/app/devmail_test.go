package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/smtp"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// syncBuffer is a buffer that goroutines write while a test reads it, and
// that signals each write.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{wrote: make(chan struct{}, 100)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// await waits until the buffer matches re, and returns the match.
func (b *syncBuffer) await(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(e2eWait)
	for {
		if m := re.FindStringSubmatch(b.String()); m != nil {
			return m
		}
		select {
		case <-b.wrote:
		case <-deadline:
			t.Fatalf("no output matching %s within %s:\n%s", re, e2eWait, b.String())
		}
	}
}

// app devmail catches what the service's SMTP sender sends and prints it,
// link and code included, for a person trying the service.
func TestDevmailPrintsEachMail(t *testing.T) {
	t.Parallel()
	stdout, stderr := newSyncBuffer(), newSyncBuffer()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"devmail", "--addr", "127.0.0.1:0"}, getenv(nil), stdout, stderr) }()
	addr := stderr.await(t, regexp.MustCompile(`SMTP_URL=(smtp://\S+)`))[1]
	sender, err := smtp.New(addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = sender.Send(t.Context(), mail.Mail{From: "accounts@localhost", To: "ada@example.com", Subject: "Your sign-in link",
		MessageID: "1@localhost", Text: "Sign in with this link:\n\nhttp://localhost:8080/sign-in?code=ABC\n", HTML: "<p>hi</p>"})
	if err != nil {
		t.Fatal(err)
	}
	stdout.await(t, regexp.MustCompile(`(?s)--- mail from accounts@localhost to ada@example.com\nSubject: Your sign-in link\n.*sign-in\?code=ABC\n`))
	// A terminal's line endings, not SMTP's.
	if strings.Contains(stdout.String(), "\r") {
		t.Errorf("devmail printed a carriage return: %q", stdout.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("devmail after its context ended: %v", err)
	}
	// Not on an address others can reach.
	err = run(t.Context(), []string{"devmail", "--addr", "0.0.0.0:1025"}, getenv(nil), &bytes.Buffer{}, &bytes.Buffer{})
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("devmail on every interface: %v, want a usage error", err)
	}
}
