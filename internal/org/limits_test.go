package org_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/uow"
)

// The limits hold on each backend, where their counts come from: the
// members of an organization from its stream, the organizations of an
// account from the views. A refusal uses no code up.
func TestLimits(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada := b.signIn(t, "ada@example.com")

		t.Run("members of an organization", func(t *testing.T) {
			o := b.create(t, ada.Token, "Crowd")
			b.fill(t, o.ID, org.MaxMembers-2)
			last := b.invite(t, ada.Token, o.ID, "bob@example.com", org.RoleMember)
			late := b.invite(t, ada.Token, o.ID, "cy@example.com", org.RoleMember)
			if _, err := b.svc.Accept(ctx, b.signIn(t, "bob@example.com").Token, last); err != nil {
				t.Fatalf("the %dth member's acceptance: %v", org.MaxMembers, err)
			}
			if _, err := b.svc.Accept(ctx, b.signIn(t, "cy@example.com").Token, late); !errors.Is(err, org.ErrFull) {
				t.Errorf("an acceptance into a full organization: %v, want ErrFull", err)
			}
			if _, err := b.svc.Offer(ctx, late); err != nil {
				t.Errorf("the refused code's offer: %v, want it still pending", err)
			}
		})

		t.Run("organizations of an account", func(t *testing.T) {
			dee := b.signIn(t, "dee@example.com")
			var first org.Organization
			for i := range org.MaxOrganizations {
				o := b.create(t, dee.Token, "Dee's")
				if i == 0 {
					first = o
				}
			}
			if _, err := b.svc.Create(ctx, dee.Token, "One too many"); !errors.Is(err, org.ErrTooManyOrganizations) {
				t.Errorf("the %dth organization: %v, want ErrTooManyOrganizations", org.MaxOrganizations+1, err)
			}
			o := b.create(t, ada.Token, "Engines")
			code := b.invite(t, ada.Token, o.ID, "dee@example.com", org.RoleMember)
			if _, err := b.svc.Accept(ctx, dee.Token, code); !errors.Is(err, org.ErrTooManyOrganizations) {
				t.Errorf("an acceptance by an account in %d: %v, want ErrTooManyOrganizations", org.MaxOrganizations, err)
			}
			if err := b.svc.Delete(ctx, dee.Token, first.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := b.svc.Accept(ctx, dee.Token, code); err != nil {
				t.Errorf("the acceptance once the account left one: %v", err)
			}
		})
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
