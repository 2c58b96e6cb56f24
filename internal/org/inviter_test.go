package org_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// An invitation works only while the owner who sent it is one. Mallory,
// an owner, invites a second address of hers as owner, and then stops
// being one, in each way there is: the invitations she sent end with her
// ownership, so that her second address cannot join with the code she
// kept; they leave the pending list, their undelivered mail leaves the
// outbox, and the database keeps their addresses nowhere. Ada's
// invitations stay.
func TestInvitationsEndWithTheInvitersOwnership(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ada := b.signIn(t, "ada@example.com")
		for _, c := range []struct {
			what string
			// lastOwner says that Mallory created the organization, and
			// Ada joined it as a member: Mallory is its only owner.
			lastOwner bool
			end       func(ctx context.Context, id uuid.UUID, mallory user.Session) error
		}{
			{what: "removed", end: func(ctx context.Context, id uuid.UUID, mallory user.Session) error {
				return b.svc.RemoveMember(ctx, ada.Token, id, mallory.User.ID)
			}},
			{what: "demoted", end: func(ctx context.Context, id uuid.UUID, mallory user.Session) error {
				_, err := b.svc.ChangeRole(ctx, ada.Token, id, mallory.User.ID, org.RoleMember)
				return err
			}},
			{what: "left", end: func(ctx context.Context, id uuid.UUID, mallory user.Session) error {
				return b.svc.RemoveMember(ctx, mallory.Token, id, mallory.User.ID)
			}},
			{what: "erased", end: func(ctx context.Context, _ uuid.UUID, mallory user.Session) error {
				return b.users.DeleteAccount(ctx, mallory.Token)
			}},
			{what: "erased-last-owner", lastOwner: true, end: func(ctx context.Context, _ uuid.UUID, mallory user.Session) error {
				return b.users.DeleteAccount(ctx, mallory.Token)
			}},
		} {
			t.Run(c.what, func(t *testing.T) {
				ctx := t.Context()
				mallory := b.signIn(t, "mallory-"+c.what+"@example.com")
				second, third := "mal2-"+c.what+"@example.com", "mal3-"+c.what+"@example.com"
				friend := "friend-" + c.what + "@example.com"
				var o org.Organization
				if c.lastOwner {
					o = b.create(t, mallory.Token, "Engines "+c.what)
					b.join(t, mallory.Token, o.ID, ada, org.RoleMember)
				} else {
					o = b.create(t, ada.Token, "Engines "+c.what)
					b.join(t, ada.Token, o.ID, mallory, org.RoleOwner)
				}
				// Mallory keeps the code of one invitation; the mail of
				// the other is not yet delivered, nor that of Ada's.
				code := b.invite(t, mallory.Token, o.ID, second, org.RoleOwner)
				if err := b.svc.Invite(ctx, mallory.Token, o.ID, third, org.RoleOwner); err != nil {
					t.Fatal(err)
				}
				if !c.lastOwner {
					if err := b.svc.Invite(ctx, ada.Token, o.ID, friend, org.RoleMember); err != nil {
						t.Fatal(err)
					}
				}
				dump, opened := b.dump(t), b.openAddresses(t)
				for _, address := range []string{second, third} {
					if !strings.Contains(dump, address) || !slices.Contains(opened, address) {
						t.Fatalf("neither the dump nor the log holds %s before Mallory is %s: they cannot tell", address, c.what)
					}
				}

				from := b.mark(t)
				if err := c.end(ctx, o.ID, mallory); err != nil {
					t.Fatal(err)
				}
				var reasons []string
				for _, e := range b.since(t, from) {
					if e.Type == org.TypeInvitationVoided {
						d, err := org.Decode[org.InvitationVoided](e)
						if err != nil {
							t.Fatal(err)
						}
						reasons = append(reasons, d.Reason)
					}
				}
				if want := []string{org.VoidedInviterNotOwner, org.VoidedInviterNotOwner}; !slices.Equal(reasons, want) {
					t.Errorf("Mallory %s: the invitations voided are %v, want her two, for %s", c.what, reasons, org.VoidedInviterNotOwner)
				}

				invs, err := b.svc.Invitations(ctx, ada.Token, o.ID)
				var pending []string
				for _, inv := range invs {
					pending = append(pending, inv.Email)
				}
				want := []string{friend}
				if c.lastOwner {
					want = nil
				}
				if err != nil || !slices.Equal(pending, want) {
					t.Errorf("Ada's pending invitations after Mallory %s: %v (%v), want %v", c.what, pending, err, want)
				}
				if !c.lastOwner {
					b.mail(t, mail.TopicOrgInvitation, friend)
				}
				b.noMail(t, "Mallory "+c.what, mail.TopicOrgInvitation)
				b.erased(t, "after Mallory "+c.what, second, third)

				// Her second address signs up, and its code is refused,
				// as is the offer its link opens.
				again := b.signIn(t, second)
				_, err = b.svc.Accept(ctx, again.Token, code)
				wantErr(t, "Accept with the code of Mallory "+c.what, err, org.ErrInvalidCode)
				_, err = b.svc.Offer(ctx, code)
				wantErr(t, "Offer of the code of Mallory "+c.what, err, org.ErrInvalidCode)
				if got := b.roles(t, ada.Token, o.ID); strings.Contains(got, second) {
					t.Errorf("the members after Mallory %s: %s", c.what, got)
				}
			})
		}
	})
}
