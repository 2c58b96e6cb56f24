package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/user"
)

// fakeOrgs is a deterministic stand-in for the organizations domain, for
// tests of the HTTP layer alone: it answers with the domain's own errors,
// decided from its input only, and keeps no state. calls, when not nil,
// hears each command it was asked to do, so that a test sees that a form
// acted.
//
//   - The one live session is fakeToken's, of fakeUser; any other token is
//     user.ErrUnauthenticated, checked first.
//   - fakeUser owns fakeOrg ("Acme"), whose members are fakeUser, its only
//     owner, and fakeMember; it is a member of fakeOtherOrg ("Beta"),
//     where it may not do what owners do. Any other organization, member
//     or invitation ID is org.ErrNotFound, uuid.Nil included.
//   - A name is refused as the domain refuses it (trimmed, 1 to 100
//     characters, no control character); "Too many" (any case) is one
//     organization too many.
//   - An invited address is checked by user.NormalizeEmail, a role by
//     org.ParseRole; fakeMember's address is a member already, an address
//     that starts with "limited" is one invitation too many (Retry-After
//     30m), one that starts with "full" finds the organization full.
//   - Invitation codes are valid when they are 32 lower-case base32
//     letters; a valid one that starts with "wrong" is for another
//     address than fakeUser's, "member" finds fakeUser a member already,
//     "full" the organization full, "many" fakeUser in too many.
//   - fakeUser, the last owner of fakeOrg, can neither leave it, be
//     removed from it nor be demoted in it.
type fakeOrgs struct {
	calls *calls
}

var _ httpapi.Orgs = fakeOrgs{}

var (
	fakeOrgID        = uuid.MustParse("01900000-0000-7000-8000-000000000101")
	fakeOtherOrgID   = uuid.MustParse("01900000-0000-7000-8000-000000000102")
	fakeInvitationID = uuid.MustParse("01900000-0000-7000-8000-000000000201")
	fakeMember       = org.Member{UserID: uuid.MustParse("01900000-0000-7000-8000-000000000301"), Email: "bob@example.com",
		Role: org.RoleMember, JoinedAt: start.Add(time.Hour)}
	fakeOrg      = org.Organization{ID: fakeOrgID, Name: "Acme", CreatedAt: start, Role: org.RoleOwner}
	fakeOtherOrg = org.Organization{ID: fakeOtherOrgID, Name: "Beta <b>", CreatedAt: start.Add(time.Minute), Role: org.RoleMember}
	fakeOwner    = org.Member{UserID: fakeUser.ID, Email: fakeUser.Email, Role: org.RoleOwner, JoinedAt: start}
	fakeInvite   = org.Invitation{ID: fakeInvitationID, Email: "grace@example.com", Role: org.RoleMember, InvitedBy: fakeUser.ID,
		SentAt: start.Add(2 * time.Hour), ExpiresAt: start.Add(2*time.Hour + 7*24*time.Hour)}
)

// calls records the commands a fake was asked to do.
type calls struct {
	mu   sync.Mutex
	list []string
}

func (c *calls) add(format string, args ...any) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, fmt.Sprintf(format, args...))
}

// take returns the commands recorded since the last call.
func (c *calls) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.list
	c.list = nil
	return out
}

// orgOf returns the organization id as fakeUser sees it.
func orgOf(id uuid.UUID) (org.Organization, error) {
	switch id {
	case fakeOrgID:
		return fakeOrg, nil
	case fakeOtherOrgID:
		return fakeOtherOrg, nil
	}
	return org.Organization{}, fmt.Errorf("org: %s: %w", id, org.ErrNotFound)
}

// ownerOf checks the token and that fakeUser owns the organization id.
func ownerOf(token string, id uuid.UUID) error {
	if token != fakeToken {
		return user.ErrUnauthenticated
	}
	o, err := orgOf(id)
	if err != nil {
		return err
	}
	if o.Role != org.RoleOwner {
		return org.ErrNotOwner
	}
	return nil
}

func (f fakeOrgs) Create(_ context.Context, token, name string) (org.Organization, error) {
	if token != fakeToken {
		return org.Organization{}, user.ErrUnauthenticated
	}
	name = strings.TrimSpace(name)
	if n := utf8.RuneCountInString(name); n == 0 || n > org.MaxNameLength || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return org.Organization{}, fmt.Errorf("org: create: %w: %d characters", org.ErrInvalidName, utf8.RuneCountInString(name))
	}
	if strings.EqualFold(name, "too many") {
		return org.Organization{}, org.ErrTooManyOrganizations
	}
	f.calls.add("Create %s", name)
	return org.Organization{ID: fakeOrgID, Name: name, CreatedAt: start, Role: org.RoleOwner}, nil
}

func (fakeOrgs) List(_ context.Context, token string) ([]org.Organization, error) {
	if token != fakeToken {
		return nil, user.ErrUnauthenticated
	}
	return []org.Organization{fakeOrg, fakeOtherOrg}, nil
}

func (fakeOrgs) Get(_ context.Context, token string, id uuid.UUID) (org.Details, error) {
	if token != fakeToken {
		return org.Details{}, user.ErrUnauthenticated
	}
	o, err := orgOf(id)
	if err != nil {
		return org.Details{}, err
	}
	if id == fakeOrgID {
		return org.Details{Organization: o, Members: []org.Member{fakeOwner, fakeMember}}, nil
	}
	other := org.Member{UserID: uuid.MustParse("01900000-0000-7000-8000-000000000302"), Email: "carol@example.com", Role: org.RoleOwner, JoinedAt: start}
	me := fakeOwner
	me.Role, me.JoinedAt = org.RoleMember, start.Add(time.Minute)
	return org.Details{Organization: o, Members: []org.Member{other, me}}, nil
}

func (f fakeOrgs) Invite(_ context.Context, token string, id uuid.UUID, address string, role org.Role) error {
	email, err := user.NormalizeEmail(address)
	if err != nil {
		return fmt.Errorf("org: invite: %w", err)
	}
	if _, err := org.ParseRole(string(role)); err != nil {
		return fmt.Errorf("org: invite: %w", err)
	}
	if err := ownerOf(token, id); err != nil {
		return err
	}
	switch {
	case email == fakeMember.Email:
		return org.ErrAlreadyMember
	case strings.HasPrefix(email, "limited"):
		return &org.TooManyInvitationsError{RetryAfter: 30*time.Minute + time.Millisecond}
	case strings.HasPrefix(email, "full"):
		return org.ErrFull
	}
	f.calls.add("Invite %s %s %s", id, email, role)
	return nil
}

func (fakeOrgs) Invitations(_ context.Context, token string, id uuid.UUID) ([]org.Invitation, error) {
	if err := ownerOf(token, id); err != nil {
		return nil, err
	}
	return []org.Invitation{fakeInvite}, nil
}

func (f fakeOrgs) Revoke(_ context.Context, token string, id, invitation uuid.UUID) error {
	if err := ownerOf(token, id); err != nil {
		return err
	}
	if invitation != fakeInvitationID {
		return org.ErrNotFound
	}
	f.calls.add("Revoke %s %s", id, invitation)
	return nil
}

func (f fakeOrgs) Accept(_ context.Context, token, code string) (org.Membership, error) {
	if token != fakeToken {
		return org.Membership{}, user.ErrUnauthenticated
	}
	if !fakeValidCode(code) {
		return org.Membership{}, fmt.Errorf("%w: malformed", org.ErrInvalidCode)
	}
	for prefix, err := range map[string]error{
		"wrong": org.ErrWrongAddress, "member": org.ErrAlreadyMember, "full": org.ErrFull, "many": org.ErrTooManyOrganizations,
	} {
		if strings.HasPrefix(code, prefix) {
			return org.Membership{}, err
		}
	}
	f.calls.add("Accept %s", code)
	o := fakeOrg
	o.Role = org.RoleMember
	return org.Membership{Organization: o, UserID: fakeUser.ID, JoinedAt: start}, nil
}

func (fakeOrgs) Offer(_ context.Context, code string) (org.InvitationOffer, error) {
	if !fakeValidCode(code) {
		return org.InvitationOffer{}, fmt.Errorf("%w: malformed", org.ErrInvalidCode)
	}
	offer := org.InvitationOffer{OrgID: fakeOrg.ID, OrgName: fakeOrg.Name, Role: org.RoleMember, Email: fakeUser.Email, ExpiresAt: start.Add(7 * 24 * time.Hour)}
	if strings.HasPrefix(code, "wrong") {
		offer.Email = "grace@example.com"
	}
	return offer, nil
}

func (f fakeOrgs) ChangeRole(_ context.Context, token string, id, member uuid.UUID, role org.Role) (org.Member, error) {
	if _, err := org.ParseRole(string(role)); err != nil {
		return org.Member{}, fmt.Errorf("org: change role of %s in %s: %w", member, id, err)
	}
	if err := ownerOf(token, id); err != nil {
		return org.Member{}, err
	}
	var m org.Member
	switch member {
	case fakeOwner.UserID:
		if role != org.RoleOwner {
			return org.Member{}, org.ErrLastOwner
		}
		m = fakeOwner
	case fakeMember.UserID:
		m = fakeMember
	default:
		return org.Member{}, org.ErrNotFound
	}
	f.calls.add("ChangeRole %s %s %s", id, member, role)
	m.Role = role
	return m, nil
}

func (f fakeOrgs) RemoveMember(_ context.Context, token string, id, member uuid.UUID) error {
	if token != fakeToken {
		return user.ErrUnauthenticated
	}
	o, err := orgOf(id)
	if err != nil {
		return err
	}
	switch {
	case member == fakeUser.ID && o.Role == org.RoleOwner:
		return org.ErrLastOwner
	case member != fakeUser.ID && o.Role != org.RoleOwner:
		return org.ErrNotOwner
	case member != fakeUser.ID && member != fakeMember.UserID:
		return org.ErrNotFound
	}
	f.calls.add("RemoveMember %s %s", id, member)
	return nil
}

func (f fakeOrgs) Delete(_ context.Context, token string, id uuid.UUID) error {
	if err := ownerOf(token, id); err != nil {
		return err
	}
	f.calls.add("Delete %s", id)
	return nil
}
