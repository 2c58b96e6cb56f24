package main

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	orgintegration "github.com/eventsourced/accounts/internal/org/integration"
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

// posts returns the posts accepted so far, and the tries by webhook-id.
func (rc *webhookReceiver) posts() ([]acceptedPost, map[string]int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.accepted), maps.Clone(rc.tries)
}

// testWebhookIsRetriedUntilItAnswers2xx posts a first sign-in's events to
// a receiver that answers 500 three times: each event is delivered once it
// answers 2xx, signed, with the event's id as webhook-id on every try, in
// the order of the user's versions, and matching its schema. The
// organization the user then creates is posted too, about the
// organization.
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
	accepted, tries := rc.posts()
	if len(accepted) != 2 {
		t.Fatalf("the receiver accepted %d posts, want 2", len(accepted))
	}
	for i, typ := range []string{integration.TypeRegistered, integration.TypeSignedIn} {
		p := accepted[i]
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
	if first := accepted[0].id; tries[first] != 4 || tries[accepted[1].id] != 1 {
		t.Errorf("tries by webhook-id %v, want 4 for the first event and 1 for the second", tries)
	}

	o, err := b.orgs.Create(t.Context(), s.Token, "Analytical Engines")
	if err != nil {
		t.Fatal(err)
	}
	b.drainUntilDelivered(t, 1)
	if accepted, _ = rc.posts(); len(accepted) != 3 {
		t.Fatalf("the receiver accepted %d posts, want 3", len(accepted))
	}
	p := accepted[2]
	if err := schemas.Check(p.body); err != nil {
		t.Errorf("the organization's post does not match its schema: %v", err)
	}
	var e publish.CloudEvent
	if err := json.Unmarshal(p.body, &e); err != nil {
		t.Fatal(err)
	}
	var added orgintegration.MemberAdded
	if err := json.Unmarshal(e.Data, &added); err != nil {
		t.Fatal(err)
	}
	want := orgintegration.MemberAdded{OrganizationID: o.ID, UserID: s.User.ID, Role: orgintegration.RoleOwner, Version: 2}
	if e.Type != orgintegration.TypeMemberAdded || e.Subject != o.ID.String() || p.id != e.ID || added != want {
		t.Errorf("post: %s about %s with webhook-id %s and %+v, want %s about %s with the event's id %s and %+v",
			e.Type, e.Subject, p.id, added, orgintegration.TypeMemberAdded, o.ID, e.ID, want)
	}
}
