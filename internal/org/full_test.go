package org_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/uow"
)

// An organization holds MaxMembers: the acceptance past it is refused,
// changes nothing, and leaves its code usable. The members are counted
// from the organization's stream, so the test fills the stream.
func TestFullOrganization(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada := b.signIn(t, "ada@example.com")
		o := b.create(t, ada.Token, "Crowd")
		b.fill(t, o.ID, org.MaxMembers-2)
		last := b.invite(t, ada.Token, o.ID, "bob@example.com", org.RoleMember)
		late := b.invite(t, ada.Token, o.ID, "cy@example.com", org.RoleMember)
		if _, err := b.svc.Accept(ctx, b.signIn(t, "bob@example.com").Token, last); err != nil {
			t.Fatalf("the %dth member's acceptance: %v", org.MaxMembers, err)
		}
		cy := b.signIn(t, "cy@example.com")
		before := b.snapshot(t)
		_, err := b.svc.Accept(ctx, cy.Token, late)
		wantErr(t, "Accept into a full organization", err, org.ErrFull)
		b.unchanged(t, "the refusal", before)
		if _, err := b.svc.Offer(ctx, late); err != nil {
			t.Errorf("the refused code's offer: %v, want it still pending", err)
		}
	})
}

// fill adds n members with accounts of no one to the organization id,
// straight to its stream and views, as n acceptances would.
func (b *bundle) fill(t *testing.T, id uuid.UUID, n int) {
	t.Helper()
	stream := org.CategoryOrg + "-" + id.String()
	views := org.ViewsProjection{Views: b.OrgViews(), Keys: b.keys}
	err := b.Runner(b.clock.Now).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		loaded, err := b.Events().Load(ctx, tx, stream, 0)
		if err != nil {
			return err
		}
		added := make([]eventstore.Event, n)
		for i := range added {
			if added[i], err = org.Events().New(org.MemberAdded{UserID: uuid.New(), Role: org.RoleMember}, eventstore.Metadata{}); err != nil {
				return err
			}
		}
		stored, err := b.Events().Append(ctx, tx, stream, eventstore.Exactly(int64(len(loaded))), added...)
		if err != nil {
			return err
		}
		return views.Apply(ctx, tx, stored...)
	})
	if err != nil {
		t.Fatalf("adding %d members: %v", n, err)
	}
}
