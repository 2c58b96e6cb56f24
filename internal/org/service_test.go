package org_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

const invitationTTL = 7 * 24 * time.Hour

// NewService refuses deps without a keyring, which seals the invited
// addresses, or without the user service and views it answers through.
func TestNewServiceRefusesMissingDeps(t *testing.T) {
	t.Parallel()
	b := setup(t, databases[1], org.Policy{})
	full := org.Deps{
		Runner: b.Runner(nil), Events: b.Events(), Outbox: b.Outbox(), Views: b.OrgViews(),
		Users: b.users, UserViews: b.Views(), Keys: b.keys,
	}
	for what, d := range map[string]func(d org.Deps) org.Deps{
		"no keyring":      func(d org.Deps) org.Deps { d.Keys = nil; return d },
		"no user service": func(d org.Deps) org.Deps { d.Users = nil; return d },
		"no user views":   func(d org.Deps) org.Deps { d.UserViews = nil; return d },
	} {
		if _, err := org.NewService(d(full), org.Policy{}, baseURL); err == nil {
			t.Errorf("NewService with %s: no error", what)
		}
	}
	if _, err := org.NewService(full, org.Policy{InvitationLimit: -1}, baseURL); err == nil {
		t.Error("NewService with a negative invitation limit: no error")
	}
}

// Create makes its caller the first owner of an organization named as
// asked, trimmed; List and Get show it to its members alone; bad names,
// bad sessions and unknown IDs are refused and change nothing.
func TestCreateListGet(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com")
		b.clock.Advance(time.Minute)
		o := b.create(t, ada.Token, "  Analytical Engines \t")
		if o.ID == uuid.Nil || o.Name != "Analytical Engines" || o.Role != org.RoleOwner || !o.CreatedAt.Equal(b.clock.Now()) {
			t.Errorf("Create = %+v, want Analytical Engines, owned by its creator, created now", o)
		}
		if got := b.types(t, eventstore.Position{}); !slices.Equal(got, []string{org.TypeCreated, org.TypeMemberAdded}) {
			t.Errorf("Create appended %v", got)
		}
		d := b.get(t, ada.Token, o.ID)
		if d.Organization != o || len(d.Members) != 1 || d.Members[0] != (org.Member{
			UserID: ada.User.ID, Email: "ada@example.com", Role: org.RoleOwner, JoinedAt: b.clock.Now(),
		}) {
			t.Errorf("Get = %+v, want %+v with Ada its owner", d, o)
		}
		b.clock.Advance(time.Minute)
		beta, alpha := b.create(t, ada.Token, "beta"), b.create(t, ada.Token, "Ålpha")
		list, err := b.svc.List(ctx, ada.Token)
		if err != nil || !slices.Equal(list, []org.Organization{o, beta, alpha}) {
			t.Errorf("List = %+v (%v), want by name: %+v", list, err, []org.Organization{o, beta, alpha})
		}
		if list, err := b.svc.List(ctx, bob.Token); err != nil || len(list) != 0 {
			t.Errorf("List of a stranger = %+v (%v), want none", list, err)
		}

		before := b.snapshot(t)
		for _, name := range []string{"", "  ", strings.Repeat("x", org.MaxNameLength+1), "a\nb", "\xff"} {
			if _, err := b.svc.Create(ctx, ada.Token, name); !errors.Is(err, org.ErrInvalidName) {
				t.Errorf("Create(%q): %v, want ErrInvalidName", name, err)
			}
		}
		_, err = b.svc.Create(ctx, "not a token", "Engines")
		wantErr(t, "Create without a session", err, user.ErrUnauthenticated)
		_, err = b.svc.List(ctx, "")
		wantErr(t, "List without a session", err, user.ErrUnauthenticated)
		_, err = b.svc.Get(ctx, "", o.ID)
		wantErr(t, "Get without a session", err, user.ErrUnauthenticated)
		for what, id := range map[string]uuid.UUID{"a stranger": o.ID, "an unknown ID": uuid.New(), "the nil ID": uuid.Nil} {
			_, err := b.svc.Get(ctx, bob.Token, id)
			wantErr(t, "Get of "+what, err, org.ErrNotFound)
		}
		b.unchanged(t, "the refusals", before)
	})
}

// An account may belong to MaxOrganizations: it can neither create nor
// join another, and the invitation it could not accept stays usable.
func TestTooManyOrganizations(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ada, bob := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com")
		bobs := b.create(t, bob.Token, "Bob's")
		code := b.invite(t, bob.Token, bobs.ID, "ada@example.com", org.RoleMember)
		for i := range org.MaxOrganizations {
			b.create(t, ada.Token, fmt.Sprintf("org %03d", i))
		}
		before := b.snapshot(t)
		_, err := b.svc.Create(t.Context(), ada.Token, "one more")
		wantErr(t, "Create beyond the limit", err, org.ErrTooManyOrganizations)
		_, err = b.svc.Accept(t.Context(), ada.Token, code)
		wantErr(t, "Accept beyond the limit", err, org.ErrTooManyOrganizations)
		b.unchanged(t, "the refusals", before)

		first, err := b.svc.List(t.Context(), ada.Token)
		if err != nil || len(first) != org.MaxOrganizations {
			t.Fatalf("List: %d organizations (%v)", len(first), err)
		}
		if err := b.svc.Delete(t.Context(), ada.Token, first[0].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := b.svc.Accept(t.Context(), ada.Token, code); err != nil {
			t.Errorf("Accept once there is room: %v", err)
		}
	})
}

// Invite mails a code to the invited address, seals the address in the
// event, and shows the invitation to the owners; Offer tells what the
// code offers and uses nothing up; a second invitation to the address
// replaces the first; every refusal changes nothing.
func TestInvite(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com")
		o := b.create(t, ada.Token, "Engines")
		b.join(t, ada.Token, o.ID, bob, org.RoleMember)
		b.clock.Advance(time.Minute)
		from := b.mark(t)

		if err := b.svc.Invite(ctx, ada.Token, o.ID, "  Cy@Example.COM ", org.RoleOwner); err != nil {
			t.Fatal(err)
		}
		m := b.mail(t, mail.TopicOrgInvitation, "cy@example.com")
		if len(m.Link.Code) != 32 || m.Link.URL != baseURL+"/invitations?code="+m.Link.Code ||
			!m.Link.ExpiresAt.Equal(b.clock.Now().Add(invitationTTL)) || m.Link.Organization != "Engines" {
			t.Errorf("the invitation's mail is %+v, want a code, its link, an expiry in 7 days, and the organization's name", m.Link)
		}
		if got := b.types(t, from); !slices.Equal(got, []string{org.TypeInvitationSent}) {
			t.Errorf("Invite appended %v", got)
		}
		if strings.Contains(b.eventsText(t), "cy@example.com") || strings.Contains(b.eventsText(t), m.Link.Code) {
			t.Error("the log holds the invited address or the code in the clear")
		}
		invs, err := b.svc.Invitations(ctx, ada.Token, o.ID)
		want := org.Invitation{
			ID: m.ID, Email: "cy@example.com", Role: org.RoleOwner, InvitedBy: ada.User.ID,
			SentAt: b.clock.Now(), ExpiresAt: m.Link.ExpiresAt,
		}
		if err != nil || len(invs) != 1 || invs[0] != want {
			t.Errorf("Invitations = %+v (%v), want %+v, its ID the mail's", invs, err, want)
		}
		offer, err := b.svc.Offer(ctx, strings.ToUpper(m.Link.Code))
		if err != nil || offer != (org.InvitationOffer{OrgID: o.ID, OrgName: "Engines", Role: org.RoleOwner, Email: "cy@example.com", ExpiresAt: m.Link.ExpiresAt}) {
			t.Errorf("Offer = %+v (%v)", offer, err)
		}

		// An address with an account is invited as one without.
		dee := b.signIn(t, "dee@example.com")
		if err := b.svc.Invite(ctx, ada.Token, o.ID, dee.User.Email, org.RoleMember); err != nil {
			t.Errorf("inviting an address with an account: %v", err)
		}
		b.mail(t, mail.TopicOrgInvitation, dee.User.Email)

		before := b.snapshot(t)
		for _, c := range []struct {
			what  string
			token string
			id    uuid.UUID
			email string
			role  org.Role
			want  error
		}{
			{"a bad address", ada.Token, o.ID, "not an address", org.RoleMember, user.ErrBadEmail},
			{"a bad role", ada.Token, o.ID, "eve@example.com", "admin", org.ErrInvalidRole},
			{"no role", ada.Token, o.ID, "eve@example.com", "", org.ErrInvalidRole},
			{"no session", "", o.ID, "eve@example.com", org.RoleMember, user.ErrUnauthenticated},
			{"a member", bob.Token, o.ID, "eve@example.com", org.RoleMember, org.ErrNotOwner},
			{"a stranger", dee.Token, o.ID, "eve@example.com", org.RoleMember, org.ErrNotFound},
			{"an unknown organization", ada.Token, uuid.New(), "eve@example.com", org.RoleMember, org.ErrNotFound},
			{"the nil ID", ada.Token, uuid.Nil, "eve@example.com", org.RoleMember, org.ErrNotFound},
			{"a member's address", ada.Token, o.ID, "BOB@example.com", org.RoleMember, org.ErrAlreadyMember},
			{"the owner's own address", ada.Token, o.ID, "ada@example.com", org.RoleOwner, org.ErrAlreadyMember},
		} {
			wantErr(t, "Invite with "+c.what, b.svc.Invite(ctx, c.token, c.id, c.email, c.role), c.want)
		}
		_, err = b.svc.Invitations(ctx, bob.Token, o.ID)
		wantErr(t, "Invitations to a member", err, org.ErrNotOwner)
		_, err = b.svc.Invitations(ctx, dee.Token, o.ID)
		wantErr(t, "Invitations to a stranger", err, org.ErrNotFound)
		for _, code := range []string{"", "nonsense", strings.Repeat("a", 32)} {
			_, err = b.svc.Offer(ctx, code)
			wantErr(t, fmt.Sprintf("Offer(%q)", code), err, org.ErrInvalidCode)
		}
		b.unchanged(t, "the refusals", before)
		b.noMail(t, "the refusals", mail.TopicOrgInvitation)

		// A second invitation to the address voids the first.
		from = b.mark(t)
		again := b.invite(t, ada.Token, o.ID, "cy@example.com", org.RoleMember)
		if got := b.types(t, from); !slices.Equal(got, []string{org.TypeInvitationVoided, org.TypeInvitationSent}) {
			t.Errorf("inviting the address again appended %v", got)
		}
		_, err = b.svc.Offer(ctx, m.Link.Code)
		wantErr(t, "Offer of the replaced invitation", err, org.ErrInvalidCode)
		if offer, err := b.svc.Offer(ctx, again); err != nil || offer.Role != org.RoleMember {
			t.Errorf("Offer of the new invitation = %+v (%v)", offer, err)
		}
		invs, err = b.svc.Invitations(ctx, ada.Token, o.ID)
		if err != nil || len(invs) != 2 || invs[0].Email != dee.User.Email || invs[1].Email != "cy@example.com" || invs[1].ID == m.ID {
			t.Errorf("Invitations = %+v (%v), want Dee's and Cy's new one", invs, err)
		}

		// An expired invitation is pending no more.
		b.clock.Advance(invitationTTL)
		if invs, err := b.svc.Invitations(ctx, ada.Token, o.ID); err != nil || len(invs) != 0 {
			t.Errorf("Invitations after they expired = %+v (%v), want none", invs, err)
		}
		_, err = b.svc.Offer(ctx, again)
		wantErr(t, "Offer of an expired invitation", err, org.ErrInvalidCode)
	})
}

// An organization may send Policy.InvitationLimit invitations within
// Policy.InvitationWindow, and is told how long to wait for the next.
func TestInvitationLimit(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada := b.signIn(t, "ada@example.com")
		o, other := b.create(t, ada.Token, "Engines"), b.create(t, ada.Token, "Other")
		for i := range 20 {
			b.invite(t, ada.Token, o.ID, fmt.Sprintf("guest%02d@example.com", i), org.RoleMember)
			b.clock.Advance(time.Minute)
		}
		before := b.snapshot(t)
		err := b.svc.Invite(ctx, ada.Token, o.ID, "one.more@example.com", org.RoleMember)
		var tooMany *org.TooManyInvitationsError
		if !errors.As(err, &tooMany) || tooMany.RetryAfter != 40*time.Minute {
			t.Fatalf("the 21st invitation within the hour: %v, want a TooManyInvitationsError to retry after 40m", err)
		}
		b.unchanged(t, "the refused invitation", before)
		b.noMail(t, "the refused invitation", mail.TopicOrgInvitation)
		// The limit is the organization's.
		b.invite(t, ada.Token, other.ID, "one.more@example.com", org.RoleMember)
		b.clock.Advance(40 * time.Minute)
		b.invite(t, ada.Token, o.ID, "one.more@example.com", org.RoleMember)
	})
}

// Accept makes the session's account a member with the role offered;
// the code works once, for the invited address alone, and a refusal
// leaves it usable.
func TestAccept(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob, cy := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com"), b.signIn(t, "cy@example.com")
		o := b.create(t, ada.Token, "Engines")
		code := b.invite(t, ada.Token, o.ID, "bob@example.com", org.RoleMember)

		before := b.snapshot(t)
		_, err := b.svc.Accept(ctx, cy.Token, code)
		wantErr(t, "Accept with another address's session", err, org.ErrWrongAddress)
		_, err = b.svc.Accept(ctx, "", code)
		wantErr(t, "Accept without a session", err, user.ErrUnauthenticated)
		for _, bad := range []string{"", "nonsense", strings.Repeat("a", 32), code[:31]} {
			_, err = b.svc.Accept(ctx, bob.Token, bad)
			wantErr(t, fmt.Sprintf("Accept(%q)", bad), err, org.ErrInvalidCode)
		}
		b.unchanged(t, "the refusals", before)

		b.clock.Advance(time.Hour)
		from := b.mark(t)
		m, err := b.svc.Accept(ctx, bob.Token, " "+strings.ToUpper(code)+" ")
		want := org.Membership{
			Organization: org.Organization{ID: o.ID, Name: "Engines", CreatedAt: o.CreatedAt, Role: org.RoleMember},
			UserID:       bob.User.ID, JoinedAt: b.clock.Now(),
		}
		if err != nil || m != want {
			t.Errorf("Accept = %+v (%v), want %+v", m, err, want)
		}
		if got := b.types(t, from); !slices.Equal(got, []string{org.TypeInvitationAccepted, org.TypeMemberAdded}) {
			t.Errorf("Accept appended %v", got)
		}
		if got := b.roles(t, bob.Token, o.ID); got != "ada@example.com:owner bob@example.com:member" {
			t.Errorf("the members are %s", got)
		}
		if list, err := b.svc.List(ctx, bob.Token); err != nil || len(list) != 1 || list[0] != want.Organization {
			t.Errorf("List of the new member = %+v (%v)", list, err)
		}
		before = b.snapshot(t)
		_, err = b.svc.Accept(ctx, bob.Token, code)
		wantErr(t, "Accept again", err, org.ErrInvalidCode)
		_, err = b.svc.Offer(ctx, code)
		wantErr(t, "Offer of a used code", err, org.ErrInvalidCode)

		// A member whose address moved to one invited meanwhile.
		moved := b.invite(t, ada.Token, o.ID, "bob.new@example.com", org.RoleOwner)
		if err := b.users.RequestEmailChange(ctx, bob.Token, "bob.new@example.com"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.users.ConfirmEmailChange(ctx, b.mail(t, mail.TopicEmailChange, "bob.new@example.com").Link.Code, bob.Token); err != nil {
			t.Fatal(err)
		}
		before = b.snapshot(t)
		_, err = b.svc.Accept(ctx, bob.Token, moved)
		wantErr(t, "Accept by a member", err, org.ErrAlreadyMember)
		b.unchanged(t, "accepting as a member", before)

		// An expired code.
		late := b.invite(t, ada.Token, o.ID, "cy@example.com", org.RoleMember)
		b.clock.Advance(invitationTTL)
		before = b.snapshot(t)
		_, err = b.svc.Accept(ctx, cy.Token, late)
		wantErr(t, "Accept of an expired code", err, org.ErrInvalidCode)
		b.unchanged(t, "accepting an expired code", before)
	})
}

// Owners change roles; the last owner cannot be demoted; a bad role, an
// unknown member and a non-owner are refused and change nothing.
func TestChangeRole(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob, cy := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com"), b.signIn(t, "cy@example.com")
		dee := b.signIn(t, "dee@example.com")
		o := b.create(t, ada.Token, "Engines")
		b.join(t, ada.Token, o.ID, bob, org.RoleMember)
		b.clock.Advance(time.Minute)
		joined := b.clock.Now()
		b.join(t, ada.Token, o.ID, cy, org.RoleMember)

		before := b.snapshot(t)
		for _, c := range []struct {
			what       string
			token      string
			id, member uuid.UUID
			role       org.Role
			want       error
		}{
			{"a bad role", ada.Token, o.ID, cy.User.ID, "admin", org.ErrInvalidRole},
			{"no session", "", o.ID, cy.User.ID, org.RoleOwner, user.ErrUnauthenticated},
			{"a member", bob.Token, o.ID, cy.User.ID, org.RoleOwner, org.ErrNotOwner},
			{"a member promoting itself", bob.Token, o.ID, bob.User.ID, org.RoleOwner, org.ErrNotOwner},
			{"a stranger", dee.Token, o.ID, cy.User.ID, org.RoleOwner, org.ErrNotFound},
			{"an unknown member", ada.Token, o.ID, dee.User.ID, org.RoleOwner, org.ErrNotFound},
			{"the nil member", ada.Token, o.ID, uuid.Nil, org.RoleOwner, org.ErrNotFound},
			{"an unknown organization", ada.Token, uuid.New(), cy.User.ID, org.RoleOwner, org.ErrNotFound},
			{"the last owner demoting itself", ada.Token, o.ID, ada.User.ID, org.RoleMember, org.ErrLastOwner},
		} {
			_, err := b.svc.ChangeRole(ctx, c.token, c.id, c.member, c.role)
			wantErr(t, "ChangeRole by "+c.what, err, c.want)
		}
		b.unchanged(t, "the refusals", before)

		from := b.mark(t)
		m, err := b.svc.ChangeRole(ctx, ada.Token, o.ID, cy.User.ID, org.RoleOwner)
		if want := (org.Member{UserID: cy.User.ID, Email: "cy@example.com", Role: org.RoleOwner, JoinedAt: joined}); err != nil || m != want {
			t.Errorf("ChangeRole = %+v (%v), want %+v", m, err, want)
		}
		if m, err := b.svc.ChangeRole(ctx, ada.Token, o.ID, cy.User.ID, org.RoleOwner); err != nil || m.Role != org.RoleOwner {
			t.Errorf("ChangeRole to the role it has = %+v (%v)", m, err)
		}
		if got := b.types(t, from); !slices.Equal(got, []string{org.TypeRoleChanged}) {
			t.Errorf("two changes to one role appended %v, want one", got)
		}
		// The new owner may demote the one before.
		if _, err := b.svc.ChangeRole(ctx, cy.Token, o.ID, ada.User.ID, org.RoleMember); err != nil {
			t.Fatal(err)
		}
		if got := b.roles(t, ada.Token, o.ID); got != "ada@example.com:member bob@example.com:member cy@example.com:owner" {
			t.Errorf("the members are %s", got)
		}
	})
}

// An owner removes anyone, a member leaves, and the last owner can do
// neither; removal ends nothing of the account.
func TestRemoveMember(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob, cy := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com"), b.signIn(t, "cy@example.com")
		dee := b.signIn(t, "dee@example.com")
		o := b.create(t, ada.Token, "Engines")
		b.join(t, ada.Token, o.ID, bob, org.RoleMember)
		b.join(t, ada.Token, o.ID, cy, org.RoleMember)

		before := b.snapshot(t)
		for _, c := range []struct {
			what       string
			token      string
			id, member uuid.UUID
			want       error
		}{
			{"no session", "", o.ID, cy.User.ID, user.ErrUnauthenticated},
			{"a member removing another", bob.Token, o.ID, cy.User.ID, org.ErrNotOwner},
			{"a member removing the owner", bob.Token, o.ID, ada.User.ID, org.ErrNotOwner},
			{"a stranger leaving", dee.Token, o.ID, dee.User.ID, org.ErrNotFound},
			{"a stranger removing", dee.Token, o.ID, cy.User.ID, org.ErrNotFound},
			{"an owner removing a stranger", ada.Token, o.ID, dee.User.ID, org.ErrNotFound},
			{"an unknown organization", ada.Token, uuid.New(), cy.User.ID, org.ErrNotFound},
			{"the last owner leaving", ada.Token, o.ID, ada.User.ID, org.ErrLastOwner},
		} {
			wantErr(t, "RemoveMember by "+c.what, b.svc.RemoveMember(ctx, c.token, c.id, c.member), c.want)
		}
		b.unchanged(t, "the refusals", before)

		if err := b.svc.RemoveMember(ctx, cy.Token, o.ID, cy.User.ID); err != nil {
			t.Errorf("a member leaving: %v", err)
		}
		if err := b.svc.RemoveMember(ctx, ada.Token, o.ID, bob.User.ID); err != nil {
			t.Errorf("the owner removing a member: %v", err)
		}
		var reasons []string
		for _, e := range b.log(t) {
			if e.Type == org.TypeMemberRemoved {
				d, err := org.Decode[org.MemberRemoved](e)
				if err != nil {
					t.Fatal(err)
				}
				reasons = append(reasons, d.Reason+" by "+d.By.String())
			}
		}
		if want := []string{"left by " + cy.User.ID.String(), "removed by " + ada.User.ID.String()}; !slices.Equal(reasons, want) {
			t.Errorf("the removals are %v, want %v", reasons, want)
		}
		if got := b.roles(t, ada.Token, o.ID); got != "ada@example.com:owner" {
			t.Errorf("the members are %s", got)
		}
		_, err := b.svc.Get(ctx, bob.Token, o.ID)
		wantErr(t, "Get by a removed member", err, org.ErrNotFound)
		if _, err := b.users.Me(ctx, bob.Token); err != nil {
			t.Errorf("the removed member's session: %v", err)
		}
	})
}

// Delete, by an owner, voids the pending invitations, erasing their
// addresses and deleting their mail, and takes the organization from its
// members; its events stay.
func TestDelete(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com")
		o := b.create(t, ada.Token, "Engines")
		b.join(t, ada.Token, o.ID, bob, org.RoleMember)
		b.take(t)
		if err := b.svc.Invite(ctx, ada.Token, o.ID, "pending@example.com", org.RoleMember); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.dump(t), "pending@example.com") || !slices.Contains(b.openAddresses(t), "pending@example.com") {
			t.Fatal("neither the dump nor the log holds pending@example.com before the deletion: they cannot tell")
		}

		before := b.snapshot(t)
		wantErr(t, "Delete by a member", b.svc.Delete(ctx, bob.Token, o.ID), org.ErrNotOwner)
		wantErr(t, "Delete of an unknown organization", b.svc.Delete(ctx, ada.Token, uuid.New()), org.ErrNotFound)
		wantErr(t, "Delete without a session", b.svc.Delete(ctx, "", o.ID), user.ErrUnauthenticated)
		b.unchanged(t, "the refusals", before)

		from := b.mark(t)
		if err := b.svc.Delete(ctx, ada.Token, o.ID); err != nil {
			t.Fatal(err)
		}
		if got := b.types(t, from); !slices.Equal(got, []string{org.TypeInvitationVoided, org.TypeDeleted}) {
			t.Errorf("Delete appended %v", got)
		}
		for _, s := range []user.Session{ada, bob} {
			_, err := b.svc.Get(ctx, s.Token, o.ID)
			wantErr(t, "Get of a deleted organization", err, org.ErrNotFound)
			if list, err := b.svc.List(ctx, s.Token); err != nil || len(list) != 0 {
				t.Errorf("List after the deletion = %+v (%v)", list, err)
			}
		}
		wantErr(t, "Delete again", b.svc.Delete(ctx, ada.Token, o.ID), org.ErrNotFound)
		b.erased(t, "after the deletion", "pending@")
		b.noMail(t, "the deletion", mail.TopicOrgInvitation)
	})
}

// Revoke ends a pending invitation: its code no longer works, and the
// database keeps its address nowhere, the outbox included.
func TestRevoke(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com")
		o := b.create(t, ada.Token, "Engines")
		b.join(t, ada.Token, o.ID, bob, org.RoleMember)
		b.take(t)
		if err := b.svc.Invite(ctx, ada.Token, o.ID, "revoked@example.com", org.RoleMember); err != nil {
			t.Fatal(err)
		}
		invs, err := b.svc.Invitations(ctx, ada.Token, o.ID)
		if err != nil || len(invs) != 1 {
			t.Fatalf("Invitations = %+v (%v)", invs, err)
		}
		if !strings.Contains(b.dump(t), "revoked@example.com") || !slices.Contains(b.openAddresses(t), "revoked@example.com") {
			t.Fatal("neither the dump nor the log holds revoked@example.com before the revocation: they cannot tell")
		}

		before := b.snapshot(t)
		wantErr(t, "Revoke by a member", b.svc.Revoke(ctx, bob.Token, o.ID, invs[0].ID), org.ErrNotOwner)
		wantErr(t, "Revoke of an unknown invitation", b.svc.Revoke(ctx, ada.Token, o.ID, uuid.New()), org.ErrNotFound)
		wantErr(t, "Revoke in an unknown organization", b.svc.Revoke(ctx, ada.Token, uuid.New(), invs[0].ID), org.ErrNotFound)
		wantErr(t, "Revoke without a session", b.svc.Revoke(ctx, "", o.ID, invs[0].ID), user.ErrUnauthenticated)
		b.unchanged(t, "the refusals", before)

		if err := b.svc.Revoke(ctx, ada.Token, o.ID, invs[0].ID); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "Revoke again", b.svc.Revoke(ctx, ada.Token, o.ID, invs[0].ID), org.ErrNotFound)
		b.erased(t, "after the revocation", "revoked@")
		b.noMail(t, "the revocation", mail.TopicOrgInvitation)
		if invs, err := b.svc.Invitations(ctx, ada.Token, o.ID); err != nil || len(invs) != 0 {
			t.Errorf("Invitations after the revocation = %+v (%v)", invs, err)
		}
	})
}
