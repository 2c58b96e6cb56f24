package user_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/integration"
	"github.com/eventsourced/accounts/schemas"
)

// published is one integration event the commands added to the outbox.
type published struct {
	topic   string
	payload string
	event   publish.CloudEvent
	data    map[string]any
}

// integrationTopics are the outbox topics of every integration event for
// both destinations.
func integrationTopics() []string {
	var topics []string
	for _, d := range []publish.Destination{publish.Broker, publish.Webhook} {
		for _, typ := range integration.Types() {
			topics = append(topics, publish.Topic(d, typ))
		}
	}
	return topics
}

// published claims and acknowledges the integration events added since the
// last call, oldest first.
func (b *bundle) published(t *testing.T) []published {
	t.Helper()
	ctx := outbox.WithScope(t.Context(), outbox.Scope{Only: integrationTopics()})
	var out []published
	for {
		// The events of one user to one destination are claimed one at a
		// time: claim until nothing is left.
		msgs, err := b.db.Outbox().Claim(ctx, b.clock.Now().Add(time.Hour), time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		out = append(out, b.decode(t, msgs)...)
	}
}

// decode decodes and acknowledges claimed integration events.
func (b *bundle) decode(t *testing.T, msgs []outbox.Message) []published {
	t.Helper()
	var out []published
	for _, m := range msgs {
		p := published{topic: m.Topic, payload: string(m.Payload)}
		if err := json.Unmarshal(m.Payload, &p.event); err != nil {
			t.Fatalf("message %s: %v", m.ID, err)
		}
		if err := json.Unmarshal(p.event.Data, &p.data); err != nil {
			t.Fatalf("message %s: data: %v", m.ID, err)
		}
		if err := schemas.Check(m.Payload); err != nil {
			t.Errorf("message %s does not match its schema: %v\n%s", m.ID, err, m.Payload)
		}
		if p.event.ID != m.ID.String() {
			t.Errorf("event id %s of message %s, want the message's ID", p.event.ID, m.ID)
		}
		if err := b.db.Outbox().Ack(t.Context(), m.ID); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestIntegrationEventsAreAddedWithTheirChange(t *testing.T) {
	b := setupPolicy(t, user.Policy{}, user.WithIntegrationEvents(publish.Events{
		Source:       baseURL,
		Destinations: []publish.Destination{publish.Broker, publish.Webhook},
	}))
	// want checks that the events are one of each type for each
	// destination, about id, at the clock's time, with these versions.
	want := func(got []published, id uuid.UUID, versions map[string]float64, secrets ...string) {
		t.Helper()
		var topics, wantTopics []string
		for _, p := range got {
			topics = append(topics, p.topic)
			e := p.event
			if e.SpecVersion != "1.0" || e.Source != baseURL || e.Subject != id.String() ||
				!e.Time.Equal(b.clock.Now()) || e.DataContentType != "application/json" {
				t.Errorf("%s: envelope %+v", p.topic, e)
			}
			if p.data["user_id"] != id.String() || p.data["version"] != versions[e.Type] {
				t.Errorf("%s: data %v, want user %s at version %v", p.topic, p.data, id, versions[e.Type])
			}
			for _, s := range secrets {
				if strings.Contains(p.payload, s) {
					t.Errorf("%s carries a code or token: %s", p.topic, p.payload)
				}
			}
		}
		for typ := range versions {
			wantTopics = append(wantTopics, "broker:"+typ, "webhook:"+typ)
		}
		slices.Sort(topics)
		slices.Sort(wantTopics)
		if !slices.Equal(topics, wantTopics) {
			t.Errorf("events %v, want %v", topics, wantTopics)
		}
	}

	code := b.link(t, "ada@example.com", "ada@example.com")
	if got := b.published(t); len(got) != 0 {
		t.Errorf("asking for a link published %d events", len(got))
	}
	s, err := b.svc.SignIn(t.Context(), code)
	if err != nil {
		t.Fatal(err)
	}
	id := s.User.ID
	first := b.published(t)
	want(first, id, map[string]float64{integration.TypeRegistered: 1, integration.TypeSignedIn: 2}, code, s.Token)
	for _, p := range first {
		if p.event.Type == integration.TypeRegistered && p.data["email"] != "ada@example.com" {
			t.Errorf("registered with data %v, want the address", p.data)
		}
	}

	b.clock.Advance(time.Minute)
	again := b.signIn(t, "ada@example.com")
	want(b.published(t), id, map[string]float64{integration.TypeSignedIn: 3}, again.Token)

	change := b.changeCode(t, again.Token, "ada@new.example")
	if got := b.published(t); len(got) != 0 {
		t.Errorf("asking for an email change published %d events", len(got))
	}
	if _, err := b.svc.ConfirmEmailChange(t.Context(), change, again.Token); err != nil {
		t.Fatal(err)
	}
	changed := b.published(t)
	want(changed, id, map[string]float64{integration.TypeEmailChanged: 5}, change)
	for _, p := range changed {
		if p.data["email"] != "ada@new.example" {
			t.Errorf("email_changed with data %v, want the new address", p.data)
		}
	}

	if err := b.svc.SignOut(t.Context(), again.Token); err != nil {
		t.Fatal(err)
	}
	if got := b.published(t); len(got) != 0 {
		t.Errorf("a sign-out published %d events", len(got))
	}
}

// A command that fails adds no event: the event exists exactly when its
// change does.
func TestIntegrationEventOfAFailedCommandIsNotAdded(t *testing.T) {
	b := setupPolicy(t, user.Policy{}, user.WithIntegrationEvents(publish.Events{
		Source: baseURL, Destinations: []publish.Destination{publish.Broker},
	}))
	ada := b.signIn(t, "ada@example.com")
	code := b.changeCode(t, ada.Token, "grace@example.com")
	b.signIn(t, "grace@example.com") // takes the address meanwhile
	b.published(t)
	if _, err := b.svc.ConfirmEmailChange(t.Context(), code, ""); !errors.Is(err, user.ErrEmailTaken) {
		t.Fatalf("confirming a taken address: %v", err)
	}
	if got := b.published(t); len(got) != 0 {
		t.Errorf("a refused email change published %v", got)
	}
}

func TestNoIntegrationEventWithoutADestination(t *testing.T) {
	b := setup(t)
	b.signIn(t, "ada@example.com")
	if got := b.published(t); len(got) != 0 {
		t.Errorf("a service without destinations published %d events", len(got))
	}
}
