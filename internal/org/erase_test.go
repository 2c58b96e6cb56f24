package org_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// The erasure of an account takes it out of every organization, as
// events: where it was the last owner, the longest-standing member
// becomes owner; where it was the last member, the organization is
// deleted; the invitations to its address are voided. A dump of the
// database then holds its address nowhere, nor those of the invitations
// that the deletion voided.
func TestErasure(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob, cy := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com"), b.signIn(t, "cy@example.com")
		// Engines: Ada owns it; Cy joined before Bob.
		engines := b.create(t, ada.Token, "Engines")
		b.clock.Advance(time.Minute)
		b.join(t, ada.Token, engines.ID, cy, org.RoleMember)
		b.clock.Advance(time.Minute)
		b.join(t, ada.Token, engines.ID, bob, org.RoleMember)
		// Shared: Ada and Bob own it.
		shared := b.create(t, ada.Token, "Shared")
		b.join(t, ada.Token, shared.ID, bob, org.RoleOwner)
		// Solo: Ada alone, with an invitation out, its mail not yet
		// delivered.
		solo := b.create(t, ada.Token, "Solo")
		b.take(t)
		if err := b.svc.Invite(ctx, ada.Token, solo.ID, "eve@example.com", org.RoleMember); err != nil {
			t.Fatal(err)
		}
		// Bob's: Bob invited Ada, who has not answered; the mail is not
		// yet delivered either.
		bobs := b.create(t, bob.Token, "Bob's")
		if err := b.svc.Invite(ctx, bob.Token, bobs.ID, "ada@example.com", org.RoleMember); err != nil {
			t.Fatal(err)
		}
		dump, opened := b.dump(t), b.openAddresses(t)
		for _, address := range []string{"ada@example.com", "eve@example.com"} {
			if !strings.Contains(dump, address) || !slices.Contains(opened, address) {
				t.Fatalf("neither the dump nor the log holds %s before the erasure: they cannot tell", address)
			}
		}

		from := b.mark(t)
		if err := b.users.DeleteAccount(ctx, ada.Token); err != nil {
			t.Fatal(err)
		}
		if got := b.roles(t, bob.Token, engines.ID); got != "cy@example.com:owner bob@example.com:member" {
			t.Errorf("Engines' members after the erasure of its owner: %s, want Cy, who joined first, its owner", got)
		}
		if got := b.roles(t, bob.Token, shared.ID); got != "bob@example.com:owner" {
			t.Errorf("Shared's members after the erasure of one owner: %s", got)
		}
		if invs, err := b.svc.Invitations(ctx, bob.Token, bobs.ID); err != nil || len(invs) != 0 {
			t.Errorf("Bob's invitations after the erasure of the invited address: %+v (%v)", invs, err)
		}
		var got []string
		for _, e := range b.since(t, from) {
			if !strings.HasPrefix(e.Stream, org.CategoryOrg+"-") {
				continue
			}
			d, err := org.Events().Decode(e)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, strings.TrimPrefix(e.Stream, org.CategoryOrg+"-")+" "+e.Type+" "+describe(d))
		}
		slices.Sort(got)
		want := []string{
			engines.ID.String() + " " + org.TypeRoleChanged + " " + cy.User.ID.String() + " owner by nobody",
			engines.ID.String() + " " + org.TypeMemberRemoved + " " + ada.User.ID.String() + " erased by nobody",
			shared.ID.String() + " " + org.TypeMemberRemoved + " " + ada.User.ID.String() + " erased by nobody",
			solo.ID.String() + " " + org.TypeMemberRemoved + " " + ada.User.ID.String() + " erased by nobody",
			solo.ID.String() + " " + org.TypeInvitationVoided + " deleted",
			solo.ID.String() + " " + org.TypeDeleted + " erased by nobody",
			bobs.ID.String() + " " + org.TypeInvitationVoided + " erased",
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("the erasure appended\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// The promotion comes before the removal, so that Engines always
		// has an owner.
		var engine []string
		for _, e := range b.since(t, from) {
			if e.Stream == org.CategoryOrg+"-"+engines.ID.String() {
				engine = append(engine, e.Type)
			}
		}
		if !slices.Equal(engine, []string{org.TypeRoleChanged, org.TypeMemberRemoved}) {
			t.Errorf("Engines' stream got %v, want the promotion first", engine)
		}

		b.erased(t, "after the erasure", "ada@", "eve@")
		b.noMail(t, "the erasure", mail.TopicOrgInvitation)

		// The address signs up again as a new account, in no
		// organization.
		again := b.signIn(t, "ada@example.com")
		if list, err := b.svc.List(ctx, again.Token); err != nil || len(list) != 0 {
			t.Errorf("the new account of the erased address is in %+v (%v)", list, err)
		}
	})
}

// describe returns the fields of an event's data that the erasure test
// compares.
func describe(d any) string {
	by := func(id uuid.UUID) string {
		if id == uuid.Nil {
			return "nobody"
		}
		return id.String()
	}
	switch d := d.(type) {
	case org.RoleChanged:
		return d.UserID.String() + " " + string(d.Role) + " by " + by(d.By)
	case org.MemberRemoved:
		return d.UserID.String() + " " + d.Reason + " by " + by(d.By)
	case org.InvitationVoided:
		return d.Reason
	case org.Deleted:
		return d.Reason + " by " + by(d.By)
	}
	return "?"
}
