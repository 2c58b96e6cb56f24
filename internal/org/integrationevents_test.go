package org_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/org/integration"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/publish"
	userintegration "github.com/eventsourced/accounts/internal/user/integration"
	"github.com/eventsourced/accounts/schemas"
)

// destinations are where the services of the tests below publish.
var destinations = publish.Events{Source: baseURL, Destinations: []publish.Destination{publish.Broker, publish.Webhook}}

// published is one integration event that the commands added to the
// outbox, the user's or an organization's.
type published struct {
	topic, key string
	event      publish.CloudEvent
	data       map[string]any
}

// String returns the event as the tests compare it: its destination, its
// type without the namespace, and its data but the subject's ID.
func (p published) String() string {
	destination, _, _ := strings.Cut(p.topic, ":")
	s := destination + " " + userintegration.Route(p.event.Type)
	for _, field := range []string{"user_id", "role", "reason", "version"} {
		if v, ok := p.data[field]; ok {
			s += fmt.Sprintf(" %s=%v", field, v)
		}
	}
	return s
}

// integrationTopics are the outbox topics of every integration event, the
// user's and the organizations', for both destinations.
func integrationTopics() []string {
	var topics []string
	for _, d := range destinations.Destinations {
		for _, typ := range slices.Concat(userintegration.Types(), integration.Types()) {
			topics = append(topics, publish.Topic(d, typ))
		}
	}
	return topics
}

// published claims and acknowledges the integration events added since the
// last call, and returns them by subject, each subject's in the order the
// relay hands them over. Each is checked against its schema.
func (b *bundle) published(t *testing.T) map[string][]published {
	t.Helper()
	ctx := outbox.WithScope(t.Context(), outbox.Scope{Only: integrationTopics()})
	out := map[string][]published{}
	for {
		// The events of one subject to one destination are claimed one
		// at a time: claim until nothing is left.
		msgs, err := b.Outbox().Claim(ctx, b.clock.Now().Add(time.Hour), time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			p := published{topic: m.Topic, key: m.Key}
			if err := json.Unmarshal(m.Payload, &p.event); err != nil {
				t.Fatalf("message %s: %v", m.ID, err)
			}
			if err := json.Unmarshal(p.event.Data, &p.data); err != nil {
				t.Fatalf("message %s: data: %v", m.ID, err)
			}
			if err := schemas.Check(m.Payload); err != nil {
				t.Errorf("message %s does not match its schema: %v\n%s", m.ID, err, m.Payload)
			}
			if err := b.Outbox().Ack(t.Context(), m.ID); err != nil {
				t.Fatal(err)
			}
			out[p.event.Subject] = append(out[p.event.Subject], p)
		}
	}
}

// organizationEvents checks that the events about the organization id are
// each keyed by it, at the clock's time, and returns them as text.
func (b *bundle) organizationEvents(t *testing.T, got map[string][]published, id uuid.UUID) []string {
	t.Helper()
	var out []string
	for _, p := range got[id.String()] {
		destination, _, _ := strings.Cut(p.topic, ":")
		if p.key != destination+":"+id.String() || p.data["organization_id"] != id.String() || !p.event.Time.Equal(b.clock.Now()) {
			t.Errorf("%s keyed %q with data %v at %s, want keyed and about %s at %s", p, p.key, p.data, p.event.Time, id, b.clock.Now())
		}
		out = append(out, p.String())
	}
	return out
}

// both returns each event as it goes to the broker, then as it goes to
// the webhook: one subject's events to one destination keep their order,
// and the destinations have none between them.
func both(events ...string) []string {
	var out []string
	for _, d := range []string{"broker", "webhook"} {
		for _, e := range events {
			out = append(out, d+" "+e)
		}
	}
	return out
}

// byDestination sorts events by destination and nothing else, keeping
// the order of each destination's.
func byDestination(events []string) []string {
	slices.SortStableFunc(events, func(a, b string) int {
		da, _, _ := strings.Cut(a, " ")
		db, _, _ := strings.Cut(b, " ")
		return strings.Compare(da, db)
	})
	return events
}

// Each command that changes a membership adds its integration event to
// the outbox with its change, in its unit of work, keyed by the
// organization: the creator's membership, an acceptance, a change of
// role, a removal, a leave and a deletion; an invitation, its revocation
// and a refused command add none.
func TestIntegrationEventsAreAddedWithTheirChange(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			b := setupPublishing(t, db, org.Policy{}, destinations)
			ctx := t.Context()
			ada, bob, cy := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com"), b.signIn(t, "cy@example.com")
			b.published(t)
			check := func(what string, id uuid.UUID, want ...string) {
				t.Helper()
				got := b.published(t)
				if events := byDestination(b.organizationEvents(t, got, id)); !slices.Equal(events, both(want...)) {
					t.Errorf("%s published\n%s\nwant\n%s", what, strings.Join(events, "\n"), strings.Join(both(want...), "\n"))
				}
				for subject, events := range got {
					if subject != id.String() {
						t.Errorf("%s published about %s: %v", what, subject, events)
					}
				}
			}

			b.clock.Advance(time.Minute)
			o := b.create(t, ada.Token, "Engines")
			check("Create", o.ID, "org.member_added user_id="+ada.User.ID.String()+" role=owner version=2")
			code := b.invite(t, ada.Token, o.ID, "bob@example.com", org.RoleMember)
			check("Invite", o.ID)
			if _, err := b.svc.Accept(ctx, bob.Token, code); err != nil {
				t.Fatal(err)
			}
			check("Accept", o.ID, "org.member_added user_id="+bob.User.ID.String()+" role=member version=5")
			if _, err := b.svc.ChangeRole(ctx, ada.Token, o.ID, bob.User.ID, org.RoleOwner); err != nil {
				t.Fatal(err)
			}
			check("ChangeRole", o.ID, "org.role_changed user_id="+bob.User.ID.String()+" role=owner version=6")
			b.invite(t, ada.Token, o.ID, "dee@example.com", org.RoleMember)
			invs, err := b.svc.Invitations(ctx, ada.Token, o.ID)
			if err != nil || len(invs) != 1 {
				t.Fatalf("Invitations = %v, %v", invs, err)
			}
			if err := b.svc.Revoke(ctx, ada.Token, o.ID, invs[0].ID); err != nil {
				t.Fatal(err)
			}
			check("an invitation and its revocation", o.ID)
			b.join(t, ada.Token, o.ID, cy, org.RoleMember)
			check("a join", o.ID, "org.member_added user_id="+cy.User.ID.String()+" role=member version=11")
			if err := b.svc.RemoveMember(ctx, bob.Token, o.ID, cy.User.ID); err != nil {
				t.Fatal(err)
			}
			check("RemoveMember", o.ID, "org.member_removed user_id="+cy.User.ID.String()+" reason=removed version=12")
			if err := b.svc.RemoveMember(ctx, bob.Token, o.ID, bob.User.ID); err != nil {
				t.Fatal(err)
			}
			check("a leave", o.ID, "org.member_removed user_id="+bob.User.ID.String()+" reason=left version=13")
			_, err = b.svc.ChangeRole(ctx, ada.Token, o.ID, ada.User.ID, org.RoleMember)
			wantErr(t, "the last owner's demotion", err, org.ErrLastOwner)
			check("a refused command", o.ID)
			b.invite(t, ada.Token, o.ID, "eve@example.com", org.RoleMember)
			if err := b.svc.Delete(ctx, ada.Token, o.ID); err != nil {
				t.Fatal(err)
			}
			// The invitation still open is voided first, at version 15.
			check("Delete", o.ID, "org.deleted reason=deleted version=16")
		})
	}
}

// The erasure of an account publishes its leaves, the promotions they
// need and the deletions of the organizations it was the last member
// of, keyed by the organizations. It deletes the account's own events
// that are still in the outbox, and leaves the organizations' alone:
// the member_added of the erased account that is not yet delivered goes
// out before its member_removed.
func TestIntegrationEventsOfAnErasure(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			b := setupPublishing(t, db, org.Policy{}, destinations)
			ctx := t.Context()
			ada, bob, cy := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com"), b.signIn(t, "cy@example.com")
			b.published(t)
			// Ada signs in again: an event about her that is still to
			// be published at her erasure.
			b.signIn(t, "ada@example.com")
			// Engines: Ada owns it; Cy joined before Bob. Solo: Ada
			// alone. Nothing of theirs is published yet.
			engines := b.create(t, ada.Token, "Engines")
			b.join(t, ada.Token, engines.ID, cy, org.RoleMember)
			b.join(t, ada.Token, engines.ID, bob, org.RoleMember)
			solo := b.create(t, ada.Token, "Solo")
			b.clock.Advance(time.Minute)

			if err := b.users.DeleteAccount(ctx, ada.Token); err != nil {
				t.Fatal(err)
			}
			got := b.published(t)
			added := "org.member_added user_id="
			for _, c := range []struct {
				name string
				id   uuid.UUID
				want []string
			}{
				{"Engines", engines.ID, []string{
					added + ada.User.ID.String() + " role=owner version=2",
					added + cy.User.ID.String() + " role=member version=5",
					added + bob.User.ID.String() + " role=member version=8",
					"org.role_changed user_id=" + cy.User.ID.String() + " role=owner version=9",
					"org.member_removed user_id=" + ada.User.ID.String() + " reason=erased version=10",
				}},
				{"Solo", solo.ID, []string{
					added + ada.User.ID.String() + " role=owner version=2",
					"org.member_removed user_id=" + ada.User.ID.String() + " reason=erased version=3",
					"org.deleted reason=erased version=4",
				}},
			} {
				var events []string
				for _, p := range got[c.id.String()] {
					events = append(events, p.String())
				}
				if events = byDestination(events); !slices.Equal(events, both(c.want...)) {
					t.Errorf("%s: published\n%s\nwant\n%s", c.name, strings.Join(events, "\n"), strings.Join(both(c.want...), "\n"))
				}
			}
			// Of Ada's own events only her deletion is left.
			var adas []string
			for _, p := range got[ada.User.ID.String()] {
				adas = append(adas, p.String())
			}
			if want := both("user.deleted user_id=" + ada.User.ID.String() + " version=4"); !slices.Equal(byDestination(adas), want) {
				t.Errorf("about Ada: %v, want %v", adas, want)
			}
			if len(got) != 3 {
				t.Errorf("events about %d subjects, want Engines, Solo and Ada", len(got))
			}
		})
	}
}

// A service without destinations adds no integration event.
func TestNoIntegrationEventWithoutADestination(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ada := b.signIn(t, "ada@example.com")
		o := b.create(t, ada.Token, "Engines")
		if err := b.svc.Delete(t.Context(), ada.Token, o.ID); err != nil {
			t.Fatal(err)
		}
		if got := b.published(t); len(got) != 0 {
			t.Errorf("a service without destinations published %v", got)
		}
	})
}
