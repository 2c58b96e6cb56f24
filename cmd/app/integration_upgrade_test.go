package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/config"
	orgintegration "github.com/eventsourced/accounts/internal/org/integration"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/publish/natsbroker/natstest"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/integration"
)

// storedBeforeTheRename returns the outbox messages of
// testdata/outbox-before-the-rename.jsonl: integration events as the
// release before the types were namespaced and versioned stored them, one
// message a line, its payload the CloudEvent byte for byte. Ada
// (…aa) registered, signed in and changed her address; Grace (…bb)
// registered, signed in and deleted her account.
func storedBeforeTheRename(t *testing.T) []outbox.Message {
	t.Helper()
	raw, err := os.ReadFile("testdata/outbox-before-the-rename.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []outbox.Message
	lines := bufio.NewScanner(bytes.NewReader(raw))
	for lines.Scan() {
		var m struct {
			ID        uuid.UUID       `json:"id"`
			Topic     string          `json:"topic"`
			Key       string          `json:"key"`
			CreatedAt time.Time       `json:"created_at"`
			Payload   json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, outbox.Message{ID: m.ID, Topic: m.Topic, Key: m.Key, CreatedAt: m.CreatedAt, Payload: m.Payload})
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// testEventsAddedBeforeTheRenameAreDeliveredAsStored upgrades an outbox
// that holds integration events of the legacy types: the relay publishes
// each as it was stored, under its old type, on the subject its new type
// has too; a user's event of a new type, added after the upgrade, goes out
// after her old ones; and a sign-in publishes the new types.
func testEventsAddedBeforeTheRenameAreDeliveredAsStored(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := newIntegrationBench(t, map[string]string{"BROKER_URL": srv.URL, "BASE_URL": "http://accounts.test"})
	stored := storedBeforeTheRename(t)
	ada := uuid.MustParse("0190a3b1-0000-7000-8000-0000000000aa")
	// Ada signs in after the upgrade: the message an upgraded instance
	// adds for it, keyed as every message about her.
	events := publish.Events{Source: "http://accounts.test", Destinations: []publish.Destination{publish.Broker}}
	after, err := events.Messages(integration.TypeSignedIn, ada.String(), integration.SignedIn{UserID: ada, Version: 5}, b.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.db.Runner(b.clock.Now).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		return b.db.Outbox().Add(ctx, tx, append(stored, after...)...)
	}); err != nil {
		t.Fatal(err)
	}
	linus := b.signIn(t, "linus@example.com")

	want := len(stored) + len(after) + 2
	if got := b.drainUntilDelivered(t, want); got.Delivered != want || got.Buried != 0 {
		t.Errorf("drained %+v, want %d delivered and nothing buried", got, want)
	}
	js := srv.JetStream(t)
	published := streamEvents(t, js, want)
	types := map[string][]string{}
	versions := map[string][]float64{}
	for _, e := range published {
		var data struct{ Version float64 }
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Fatal(err)
		}
		types[e.Subject] = append(types[e.Subject], e.Type)
		versions[e.Subject] = append(versions[e.Subject], data.Version)
	}
	for subject, want := range map[string]struct {
		types    []string
		versions []float64
	}{
		ada.String(): {
			[]string{"user.registered", "user.signed_in", "user.email_changed", integration.TypeSignedIn},
			[]float64{1, 2, 4, 5},
		},
		"0190a3b1-0000-7000-8000-0000000000bb": {
			[]string{"user.registered", "user.signed_in", "user.deleted"},
			[]float64{1, 2, 3},
		},
		linus.User.ID.String(): {
			[]string{integration.TypeRegistered, integration.TypeSignedIn},
			[]float64{1, 2},
		},
	} {
		if !slices.Equal(types[subject], want.types) || !slices.Equal(versions[subject], want.versions) {
			t.Errorf("the stream holds %v at versions %v about %s, want %v at %v",
				types[subject], versions[subject], subject, want.types, want.versions)
		}
	}

	// The old events went out byte for byte as they were stored.
	stream, err := js.Stream(t.Context(), "ACCOUNTS")
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string][]byte{}
	for seq := uint64(1); seq <= uint64(want); seq++ {
		m, err := stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		sent[m.Header.Get("Nats-Msg-Id")] = m.Data
	}
	for _, m := range stored {
		if !bytes.Equal(sent[m.ID.String()], m.Payload) {
			t.Errorf("message %s of %s sent as\n%s\nwant it as stored\n%s", m.ID, m.Topic, sent[m.ID.String()], m.Payload)
		}
	}
}

// Every destination has a handler, under the retry policy of integration
// events, for the topics of today's types, the user's and the
// organizations', and of the legacy ones, whose events may still wait in
// the outbox: without one they would wait for good, and hold back their
// subjects' later events.
func TestEveryDestinationDeliversEveryType(t *testing.T) {
	t.Parallel()
	for name, vars := range map[string]map[string]string{
		"NATS":    {"BROKER_URL": "nats://127.0.0.1:1"},
		"Kafka":   {"BROKER_URL": "kafka://127.0.0.1:1"},
		"webhook": {"WEBHOOK_URL": "http://127.0.0.1:1/events", "WEBHOOK_SECRET": "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Load(getenv(vars))
			if err != nil {
				t.Fatal(err)
			}
			e := env{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			p, err := e.publishers()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			d := e.integrationEvents().Destinations
			if len(d) != 1 {
				t.Fatalf("destinations %v, want one", d)
			}
			for _, typ := range slices.Concat(integration.Types(), orgintegration.Types(), slices.Collect(maps.Keys(integration.Legacy()))) {
				topic := publish.Topic(d[0], typ)
				if p.handlers[topic] == nil || !slices.Contains(p.topics, topic) {
					t.Errorf("no handler under the retry policy for %s", topic)
				}
			}
		})
	}
}
