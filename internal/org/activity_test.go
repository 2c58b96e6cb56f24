package org_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/user"
)

// TestActivity: the activity projection, given the organizations as a
// source, shows each account its own creations, joins, changes of role,
// removals, leaves and the deletions of its organizations, in order, with
// the organization's ID, role and name, and nothing of them to anyone
// else; the erasure of an account leaves nothing of it. A blue/green
// rebuild of the activity makes the same rows, on each backend.
func TestActivity(t *testing.T) {
	t.Parallel()
	onEach(t, testActivity)
}

func testActivity(t *testing.T, b *bundle) {
	p := user.ActivityProjection{
		Store: b.ActivityStore(), Log: b.Log(async.LogConfig{}), Keys: b.keys,
		Sources: []user.ActivitySource{org.ActivitySource{Events: b.Events()}},
	}
	caughtUp := runActivity(t, b, p)
	step := func() { b.clock.Advance(time.Minute) }
	ada, bob, carol, dave := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com"), b.signIn(t, "carol@example.com"), b.signIn(t, "dave@example.com")

	step()
	engines := b.create(t, ada.Token, "Analytical Engines")
	step()
	b.join(t, ada.Token, engines.ID, bob, org.RoleMember)
	step()
	b.join(t, ada.Token, engines.ID, carol, org.RoleMember)
	for _, role := range []org.Role{org.RoleOwner, org.RoleMember} {
		step()
		if _, err := b.svc.ChangeRole(t.Context(), ada.Token, engines.ID, bob.User.ID, role); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if err := b.svc.RemoveMember(t.Context(), ada.Token, engines.ID, bob.User.ID); err != nil {
		t.Fatal(err)
	}
	step()
	b.join(t, ada.Token, engines.ID, bob, org.RoleOwner)
	step()
	if err := b.svc.RemoveMember(t.Context(), bob.Token, engines.ID, bob.User.ID); err != nil {
		t.Fatal(err)
	}
	// A name of another script, with spaces, and an organization deleted
	// with two members.
	step()
	ecole := b.create(t, carol.Token, "  École des Ponts  ")
	step()
	b.join(t, carol.Token, ecole.ID, bob, org.RoleOwner)
	step()
	if err := b.svc.Delete(t.Context(), bob.Token, ecole.ID); err != nil {
		t.Fatal(err)
	}
	// Dave joins, and creates an organization of his own, and erases his
	// account: Ada's organization loses him, and his own is deleted.
	step()
	b.join(t, ada.Token, engines.ID, dave, org.RoleMember)
	step()
	b.create(t, dave.Token, "Dave's")
	step()
	if err := b.users.DeleteAccount(t.Context(), dave.Token); err != nil {
		t.Fatal(err)
	}
	caughtUp()

	detail := func(o org.Organization, role org.Role) string {
		return org.ActivityDetail{Org: o.ID, Name: strings.TrimSpace(o.Name), Role: role}.String()
	}
	want := map[uuid.UUID][]string{
		ada.User.ID: {org.ActivityCreated + " " + detail(engines, org.RoleOwner)},
		bob.User.ID: {
			org.ActivityDeleted + " " + detail(ecole, ""),
			org.ActivityJoined + " " + detail(ecole, org.RoleOwner),
			org.ActivityLeft + " " + detail(engines, ""),
			org.ActivityJoined + " " + detail(engines, org.RoleOwner),
			org.ActivityRemoved + " " + detail(engines, ""),
			org.ActivityRoleChanged + " " + detail(engines, org.RoleMember),
			org.ActivityRoleChanged + " " + detail(engines, org.RoleOwner),
			org.ActivityJoined + " " + detail(engines, org.RoleMember),
		},
		carol.User.ID: {
			org.ActivityDeleted + " " + detail(ecole, ""),
			org.ActivityCreated + " " + detail(ecole, org.RoleOwner),
			org.ActivityJoined + " " + detail(engines, org.RoleMember),
		},
		dave.User.ID: nil,
	}
	if got := bob.User.ID; !strings.Contains(want[got][0], "École des Ponts") {
		t.Fatalf("the detail %q does not name the organization as it was created, trimmed", want[got][0])
	}
	live := activities(t, p, want)
	for id, items := range live {
		var got []string
		for _, a := range items {
			if strings.HasPrefix(a.Type, "org_") {
				got = append(got, a.Type+" "+a.Detail)
			}
		}
		if !slices.Equal(got, want[id]) {
			t.Errorf("the organizations' activity of %s, newest first:\n%s\nwant\n%s", id, strings.Join(got, "\n"), strings.Join(want[id], "\n"))
		}
		for _, a := range items {
			if _, err := org.ParseActivityDetail(a.Type, a.Detail); strings.HasPrefix(a.Type, "org_") && err != nil {
				t.Errorf("%s %q: %v", a.Type, a.Detail, err)
			}
		}
	}
	if len(live[dave.User.ID]) != 0 {
		t.Errorf("the erased account's activity holds %+v", live[dave.User.ID])
	}

	from, to, err := async.Renew(t.Context(), b.Log(async.LogConfig{PollInterval: 5 * time.Millisecond}), p, nil, async.WithFollowInterval(10*time.Millisecond))
	if err != nil || from != 1 || to != 2 {
		t.Fatalf("Renew: from %d to %d, %v; want from 1 to 2", from, to, err)
	}
	rebuilt := activities(t, p, want)
	for id := range want {
		if !slices.Equal(rebuilt[id], live[id]) {
			t.Errorf("the activity of %s rebuilt:\n%+v\nwant as it was:\n%+v", id, rebuilt[id], live[id])
		}
	}
}

// runActivity runs the activity projection p until t ends, and returns a
// function that waits until it has applied every event of the log.
func runActivity(t *testing.T, b *bundle, p user.ActivityProjection) (caughtUp func()) {
	t.Helper()
	r, err := async.NewRunner(b.Log(async.LogConfig{PollInterval: 5 * time.Millisecond}), []projections.Projection{p},
		async.WithFollowInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		r.Close()
	})
	return func() {
		t.Helper()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(30 * time.Second)
		for {
			n, err := p.Behind(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			for _, s := range r.Status() {
				if s.State == async.StateFailed {
					t.Fatalf("the activity failed at %s: %v", projections.FormatPosition(s.Position), s.Err)
				}
			}
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("the activity is still %d events behind", n)
			}
		}
	}
}

// activities returns the whole activity of each account of want, newest
// first, as p serves it.
func activities(t *testing.T, p user.ActivityProjection, want map[uuid.UUID][]string) map[uuid.UUID][]user.Activity {
	t.Helper()
	out := map[uuid.UUID][]user.Activity{}
	for id := range want {
		items, more, err := p.Page(t.Context(), id, nil, 100)
		if err != nil || more {
			t.Fatalf("the activity of %s: more %v, %v", id, more, err)
		}
		out[id] = items
	}
	return out
}
