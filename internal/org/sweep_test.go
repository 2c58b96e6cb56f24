package org_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/dbdump"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/projections"
)

// The sweep deletes the rows of invitations that expired a few minutes
// ago and forgets their keys, which erases their addresses from the log;
// a live invitation stays whole.
func TestSweep(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada := b.signIn(t, "ada@example.com")
		o := b.create(t, ada.Token, "Engines")
		b.invite(t, ada.Token, o.ID, "expired@example.com", org.RoleMember)
		b.clock.Advance(time.Hour)
		live := b.invite(t, ada.Token, o.ID, "live@example.com", org.RoleMember)

		b.clock.Advance(invitationTTL - time.Hour + 4*time.Minute)
		if n, err := b.svc.Sweep(ctx); err != nil || n != 2 {
			t.Errorf("a sweep within the margin deleted %d (%v), want only the records of the two invitations sent, past the window", n, err)
		}
		if !strings.Contains(b.dump(t), "expired@example.com") || !slices.Contains(b.openAddresses(t), "expired@example.com") {
			t.Fatal("neither the dump nor the log holds expired@example.com before the sweep: they cannot tell")
		}
		b.clock.Advance(2 * time.Minute)
		if n, err := b.svc.Sweep(ctx); err != nil || n != 2 {
			t.Errorf("the sweep deleted %d (%v), want the expired invitation's row and key", n, err)
		}
		b.erased(t, "after the sweep", "expired@")
		if offer, err := b.svc.Offer(ctx, live); err != nil || offer.Email != "live@example.com" {
			t.Errorf("Offer of the live invitation after the sweep = %+v (%v)", offer, err)
		}
		// The expired invitation's event reads as erased, and a rebuild
		// of the views adds no row for it.
		if n, err := projections.Rebuild(ctx, b.Runner(b.clock.Now), b.Events(), org.ViewsProjection{Views: b.OrgViews(), Keys: b.keys}); err != nil || n == 0 {
			t.Fatalf("rebuild: %d events (%v)", n, err)
		}
		if invs, err := b.svc.Invitations(ctx, ada.Token, o.ID); err != nil || len(invs) != 1 || invs[0].Email != "live@example.com" {
			t.Errorf("Invitations after the sweep and a rebuild = %+v (%v)", invs, err)
		}
		b.erased(t, "after the rebuild", "expired@")
	})
}

// A rebuild of the views from the log gives the views the commands kept.
func TestRebuildGivesTheSameViews(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob, cy := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com"), b.signIn(t, "cy@example.com")
		o := b.create(t, ada.Token, "Engines")
		gone := b.create(t, ada.Token, "Gone")
		b.clock.Advance(time.Minute)
		b.join(t, ada.Token, o.ID, bob, org.RoleMember)
		b.join(t, ada.Token, o.ID, cy, org.RoleMember)
		if _, err := b.svc.ChangeRole(ctx, ada.Token, o.ID, bob.User.ID, org.RoleOwner); err != nil {
			t.Fatal(err)
		}
		if err := b.svc.RemoveMember(ctx, cy.Token, o.ID, cy.User.ID); err != nil {
			t.Fatal(err)
		}
		b.invite(t, ada.Token, o.ID, "pending@example.com", org.RoleOwner)
		b.invite(t, ada.Token, gone.ID, "pending@example.com", org.RoleOwner)
		if err := b.svc.Delete(ctx, ada.Token, gone.ID); err != nil {
			t.Fatal(err)
		}
		views := func() string {
			var rows []dbdump.Row
			for _, r := range b.rows(t) {
				if strings.HasPrefix(r.Table, "org") {
					rows = append(rows, r)
				}
			}
			return dbdump.Text(rows)
		}
		before := views()
		if strings.Count(before, "\n") != 8 {
			t.Errorf("the views hold\n%s\nwant one organization, two members, one invitation and the records of the four Ada sent", before)
		}
		if _, err := projections.Rebuild(context.Background(), b.Runner(b.clock.Now), b.Events(), org.ViewsProjection{Views: b.OrgViews(), Keys: b.keys}); err != nil {
			t.Fatal(err)
		}
		if after := views(); after != before {
			t.Errorf("the rebuilt views hold\n%s\nwant\n%s", after, before)
		}
	})
}
