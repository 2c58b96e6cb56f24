package org_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/org"
)

// An account sends at most Policy.InvitationAccountLimit invitations
// within the window in all its organizations together: deleting an
// organization gives it none back, another account's count is its own,
// and the window moving on lets it invite again.
func TestInvitationAccountLimit(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		svc := b.newService(t, org.Policy{InvitationAccountLimit: 3}, b.Events(), b.OrgViews())
		ada, bob := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com")
		n := 0
		invite := func(token string, o org.Organization) error {
			n++
			return svc.Invite(ctx, token, o.ID, fmt.Sprintf("invited-%d@example.com", n), org.RoleMember)
		}
		first := b.create(t, ada.Token, "First")
		for range 2 {
			if err := invite(ada.Token, first); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.svc.Delete(ctx, ada.Token, first.ID); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(10 * time.Minute)
		second := b.create(t, ada.Token, "Second")
		if err := invite(ada.Token, second); err != nil {
			t.Fatalf("the third invitation: %v", err)
		}
		before := b.snapshot(t)
		err := invite(ada.Token, second)
		var tooMany *org.TooManyInvitationsError
		if !errors.As(err, &tooMany) || tooMany.RetryAfter != 50*time.Minute {
			t.Fatalf("the fourth invitation, with the first organization deleted: %v, want TooManyInvitations, retry after 50m", err)
		}
		b.unchanged(t, "the refused invitation", before)

		bobs := b.create(t, bob.Token, "Bob's")
		if err := invite(bob.Token, bobs); err != nil {
			t.Errorf("another account's invitation: %v", err)
		}
		b.clock.Advance(50 * time.Minute)
		if err := invite(ada.Token, second); err != nil {
			t.Errorf("an invitation once the window moved on: %v", err)
		}
	})
}
