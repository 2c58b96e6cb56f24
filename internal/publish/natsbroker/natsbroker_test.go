package natsbroker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventsourced/accounts/internal/publish/natsbroker"
	"github.com/eventsourced/accounts/internal/publish/natsbroker/natstest"
)

func newPublisher(t *testing.T, url string) *natsbroker.Publisher {
	t.Helper()
	return newPublisherB(t, url)
}

func newPublisherB(t testing.TB, url string) *natsbroker.Publisher {
	t.Helper()
	p, err := natsbroker.New(natsbroker.Config{URLs: url, Stream: "ACCOUNTS", Subjects: []string{"accounts.>"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// streamOf returns the stream ACCOUNTS of srv.
func streamOf(t *testing.T, srv *natstest.Server) jetstream.Stream {
	t.Helper()
	s, err := srv.JetStream(t).Stream(t.Context(), "ACCOUNTS")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func msg(ctx context.Context, id, payload string) *message.Message {
	m := message.NewMessage(id, []byte(payload))
	m.Metadata.Set("content-type", "application/cloudevents+json")
	m.Metadata.Set("key", "0190a3b1-0000-7000-8000-000000000001")
	m.SetContext(ctx)
	return m
}

// publishSoon retries a publish while the client reconnects, as the relay
// would, for at most ten seconds.
func publishSoon(t *testing.T, try func(string) error, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := try(id)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish still fails after the server is back: %v", err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []natsbroker.Config{
		{Stream: "ACCOUNTS", Subjects: []string{"a.>"}},
		{URLs: "nats://127.0.0.1:1", Stream: "A.B", Subjects: []string{"a.>"}},
		{URLs: "nats://127.0.0.1:1", Stream: "ACCOUNTS"},
		{URLs: "nats://127.0.0.1:1", Stream: "ACCOUNTS", Subjects: []string{"a.>"}, DuplicateWindow: -time.Second},
	} {
		if _, err := natsbroker.New(c); err == nil || !strings.HasPrefix(err.Error(), "natsbroker: ") {
			t.Errorf("config %+v: error %v", c, err)
		}
	}
	_, err := natsbroker.New(natsbroker.Config{URLs: "nats://user:hunter2@[::1", Stream: "ACCOUNTS", Subjects: []string{"a.>"}})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a malformed URL: error %v, want one without the password", err)
	}
}

// TestPublisher holds the JetStream publisher to what a consumer of the
// stream relies on, with a server of the test's own.
func TestPublisher(t *testing.T) {
	t.Parallel()
	t.Run("stores the message with its ID and headers", testPublishStoresTheMessageWithItsIDAndHeaders)
	t.Run("drops a repeat", testPublishOfARepeatIsDropped)
	t.Run("widens an existing stream and keeps its settings", testPublisherWidensAnExistingStreamAndKeepsItsSettings)
	t.Run("fits the window to a stream that keeps little", testPublisherFitsTheWindowToAStreamThatKeepsLittle)
	t.Run("outlives the server", testPublisherOutlivesTheServer)
}

func testPublishStoresTheMessageWithItsIDAndHeaders(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	p := newPublisher(t, srv.URL)
	id := "0190a3b1-0000-7000-8000-0000000000aa"
	if err := p.Publish("accounts.user.registered", msg(t.Context(), id, `{"specversion":"1.0"}`)); err != nil {
		t.Fatal(err)
	}
	s := streamOf(t, srv)
	if got := s.CachedInfo().Config.Duplicates; got != natsbroker.DefaultDuplicateWindow {
		t.Errorf("duplicate window %s, want %s", got, natsbroker.DefaultDuplicateWindow)
	}
	raw, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Subject != "accounts.user.registered" || string(raw.Data) != `{"specversion":"1.0"}` {
		t.Errorf("stored %s %q", raw.Subject, raw.Data)
	}
	for k, want := range map[string]string{
		"Nats-Msg-Id":  id,
		"content-type": "application/cloudevents+json",
		"key":          "0190a3b1-0000-7000-8000-000000000001",
	} {
		if got := raw.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
}

// At-least-once delivery publishes a message again when its
// acknowledgement was lost: the stream keeps one copy.
func testPublishOfARepeatIsDropped(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	p := newPublisher(t, srv.URL)
	for range 3 {
		if err := p.Publish("accounts.user.signed_in", msg(t.Context(), "0190a3b1-0000-7000-8000-0000000000bb", `{}`)); err != nil {
			t.Fatal(err)
		}
	}
	info, err := streamOf(t, srv).Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("the stream holds %d messages after three publishes of one, want 1", info.State.Msgs)
	}
}

// A stream that an operator made keeps its settings; only a duplicate
// window shorter than the relay's retries need, and missing subjects, are
// changed.
func testPublisherWidensAnExistingStreamAndKeepsItsSettings(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	if _, err := srv.JetStream(t).CreateStream(t.Context(), jetstream.StreamConfig{
		Name: "ACCOUNTS", Subjects: []string{"legacy.>"}, MaxAge: 48 * time.Hour, Storage: jetstream.MemoryStorage,
	}); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, srv.URL)
	if err := p.Publish("accounts.user.registered", msg(t.Context(), "0190a3b1-0000-7000-8000-0000000000cc", `{}`)); err != nil {
		t.Fatal(err)
	}
	cfg := streamOf(t, srv).CachedInfo().Config
	if cfg.Duplicates != natsbroker.DefaultDuplicateWindow || cfg.MaxAge != 48*time.Hour || cfg.Storage != jetstream.MemoryStorage ||
		strings.Join(cfg.Subjects, " ") != "legacy.> accounts.>" {
		t.Errorf("stream after start: duplicates %s, max age %s, storage %s, subjects %v", cfg.Duplicates, cfg.MaxAge, cfg.Storage, cfg.Subjects)
	}
}

// A stream that keeps its messages for less than the duplicate window gets
// a window as long as it keeps them, the longest JetStream allows, rather
// than a publisher that never starts.
func testPublisherFitsTheWindowToAStreamThatKeepsLittle(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	if _, err := srv.JetStream(t).CreateStream(t.Context(), jetstream.StreamConfig{
		Name: "ACCOUNTS", Subjects: []string{"accounts.>"}, MaxAge: 5 * time.Minute, Duplicates: time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, srv.URL)
	if err := p.Publish("accounts.user.registered", msg(t.Context(), "0190a3b1-0000-7000-8000-0000000000dd", `{}`)); err != nil {
		t.Fatal(err)
	}
	if got := streamOf(t, srv).CachedInfo().Config.Duplicates; got != 5*time.Minute {
		t.Errorf("duplicate window %s, want the stream's max age of 5m", got)
	}
}

// A server that is down when the publisher starts, or goes away later, only
// makes publishes fail until it is back.
func testPublisherOutlivesTheServer(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	srv.Stop()
	p := newPublisher(t, srv.URL)
	try := func(id string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		return p.Publish("accounts.user.signed_in", msg(ctx, id, `{}`))
	}
	if err := try("0190a3b1-0000-7000-8000-000000000001"); err == nil {
		t.Fatal("publish succeeded with the server down")
	}
	srv.Start()
	publishSoon(t, try, "0190a3b1-0000-7000-8000-000000000002")
	srv.Stop()
	if err := try("0190a3b1-0000-7000-8000-000000000003"); err == nil {
		t.Fatal("publish succeeded with the server down")
	}
	srv.Start()
	publishSoon(t, try, "0190a3b1-0000-7000-8000-000000000004")
	info, err := streamOf(t, srv).Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("the stream holds %d messages, want the 2 published while the server was up", info.State.Msgs)
	}
}
