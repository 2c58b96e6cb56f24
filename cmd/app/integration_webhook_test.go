package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/user/integration"
	"github.com/eventsourced/accounts/schemas"
)

const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// webhookReceiver verifies each post with the Standard Webhooks library
// and answers 500 to the first fail posts, then 200.
type webhookReceiver struct {
	t        *testing.T
	verifier *standardwebhooks.Webhook
	mu       sync.Mutex
	fail     int
	tries    map[string]int // by webhook-id
	accepted []acceptedPost
}

type acceptedPost struct {
	id   string
	body []byte
}

func (rc *webhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := rc.verifier.Verify(body, r.Header); err != nil {
		rc.t.Errorf("a post fails verification: %v", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	// The same signature does not hold for a body changed in one byte.
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)/2] ^= 1
	if err := rc.verifier.Verify(tampered, r.Header); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		rc.t.Errorf("a tampered body verifies: %v", err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	id := r.Header.Get("webhook-id")
	rc.tries[id]++
	if rc.fail > 0 {
		rc.fail--
		http.Error(w, "busy", http.StatusInternalServerError)
		return
	}
	rc.accepted = append(rc.accepted, acceptedPost{id: id, body: body})
	w.WriteHeader(http.StatusNoContent)
}

// testWebhookIsRetriedUntilItAnswers2xx posts a first sign-in's events to
// a receiver that answers 500 three times: each event is delivered once it
// answers 2xx, signed, with the event's id as webhook-id on every try, in
// the order of the user's versions, and matching its schema.
func testWebhookIsRetriedUntilItAnswers2xx(t *testing.T) {
	t.Parallel()
	verifier, err := standardwebhooks.NewWebhook(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &webhookReceiver{t: t, verifier: verifier, fail: 3, tries: map[string]int{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	b := newIntegrationBench(t, map[string]string{
		"WEBHOOK_URL": srv.URL + "/hooks/accounts", "WEBHOOK_SECRET": webhookSecret, "BASE_URL": "http://accounts.test",
	})
	s := b.signIn(t, "ada@example.com")
	stats := b.drainUntilDelivered(t, 2)
	if stats.Retried != 3 || stats.Buried != 0 {
		t.Errorf("relay: %+v, want three retries and nothing buried", stats)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.accepted) != 2 {
		t.Fatalf("the receiver accepted %d posts, want 2", len(rc.accepted))
	}
	for i, typ := range []string{integration.TypeRegistered, integration.TypeSignedIn} {
		p := rc.accepted[i]
		var e publish.CloudEvent
		if err := json.Unmarshal(p.body, &e); err != nil {
			t.Fatal(err)
		}
		if err := schemas.Check(p.body); err != nil {
			t.Errorf("post %d does not match its schema: %v", i, err)
		}
		if e.Type != typ || e.Subject != s.User.ID.String() || p.id != e.ID {
			t.Errorf("post %d: %s about %s with webhook-id %s, want %s about %s with the event's id %s", i, e.Type, e.Subject, p.id, typ, s.User.ID, e.ID)
		}
	}
	// The three 500s went to the first event, retried under its own id;
	// the second waited for it.
	if first := rc.accepted[0].id; rc.tries[first] != 4 || rc.tries[rc.accepted[1].id] != 1 {
		t.Errorf("tries by webhook-id %v, want 4 for the first event and 1 for the second", rc.tries)
	}
}
