package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/smtp"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
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
	stdout.await(t, regexp.MustCompile(`(?s)--- mail from accounts@localhost to ada@example.com\r?\nSubject: Your sign-in link\r?\n.*sign-in\?code=ABC`))
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

// A benchmark that Ctrl-C or --timeout ends early still reports what it
// did, and says it was cut short.
func TestBenchmarkCutShortSaysSo(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	store := db.Outbox()
	if err := db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var msgs []outbox.Message
		for i := range 3 {
			m, err := outbox.NewMessage(benchTopic, map[string]int{"seq": i}, tx.Now())
			if err != nil {
				return err
			}
			msgs = append(msgs, m)
		}
		return store.Add(ctx, tx, msgs...)
	}); err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	second, release := make(chan struct{}), make(chan struct{})
	relay, err := outbox.NewRelay(store, map[string]outbox.Handler{benchTopic: func(ctx context.Context, m outbox.Message) error {
		if n := seen.Add(1); n > 1 {
			if n == 2 {
				close(second)
			}
			<-release // The rest hang until the run is cut short.
		}
		return nil
	}}, outbox.RelayConfig{Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-second
		cancel()
		close(release)
	}()
	elapsed, err := runUntilDone(ctx, "bench drain", store, relay, make(chan struct{}), &seen, 3, func(func() int64) func() { return func() {} })
	var cut *cutShortError
	if !errors.As(err, &cut) || !errors.Is(err, context.Canceled) || cut.of != 3 || cut.done < 1 || elapsed <= 0 {
		t.Fatalf("cut short: %v (%+v) after %s, want a cutShortError with the count so far", err, cut, elapsed)
	}
}
