package org

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/aggregate"
)

// The decisions of the commands: each reads the state of an organization
// (aggregate.go) and returns the data of the events to append, in order,
// or the refusal. They read no database and no clock: what they need of
// either, the command gives them.

// exists reports whether the organization was created and not deleted.
func (o organization) exists() bool { return o.created && !o.deleted }

// memberOf returns the membership of the account by, or [ErrNotFound]
// when it is not a member: it learns nothing of the organization.
func (o organization) memberOf(by uuid.UUID) (member, error) {
	m, ok := o.members[by]
	if !o.exists() || !ok {
		return member{}, fmt.Errorf("%w: no organization %s of which the account is a member", ErrNotFound, o.id)
	}
	return m, nil
}

// ownerOf returns [ErrNotFound] when the account by is not a member, and
// [ErrNotOwner] when it is not an owner.
func (o organization) ownerOf(by uuid.UUID) error {
	m, err := o.memberOf(by)
	if err != nil {
		return err
	}
	if m.role != RoleOwner {
		return fmt.Errorf("%w: the account is a member of %s, not an owner", ErrNotOwner, o.id)
	}
	return nil
}

// owners counts the owners.
func (o organization) owners() int {
	n := 0
	for _, m := range o.members {
		if m.role == RoleOwner {
			n++
		}
	}
	return n
}

// pending returns the invitation id when it can still be accepted at now.
func (o organization) pending(id uuid.UUID, now time.Time) (invitation, bool) {
	inv, ok := o.invitations[id]
	if !ok || !now.Before(inv.expiresAt) {
		return invitation{}, false
	}
	return inv, true
}

// open returns the IDs of every invitation neither accepted, revoked nor
// voided, expired or not, oldest first.
func (o organization) open() []uuid.UUID {
	ids := make([]uuid.UUID, 0, len(o.invitations))
	for id := range o.invitations {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int {
		return cmp.Or(o.invitations[a].sentAt.Compare(o.invitations[b].sentAt), slices.Compare(a[:], b[:]))
	})
	return ids
}

// voidSentBy voids the invitations that the member by sent and that are
// pending at now, for by is no longer an owner: an invitation works only
// while the owner who sent it is one. Those that expired can no longer
// be accepted, and the sweep forgets their keys. It leaves out the
// invitations of except, which the decision voids already.
func (o organization) voidSentBy(by uuid.UUID, now time.Time, except []uuid.UUID) []any {
	var out []any
	for _, id := range o.open() {
		inv := o.invitations[id]
		if inv.invitedBy == by && now.Before(inv.expiresAt) && !slices.Contains(except, id) {
			out = append(out, InvitationVoided{InvitationID: id, Reason: VoidedInviterNotOwner})
		}
	}
	return out
}

// longestStanding returns the member other than except who joined first,
// and false when there is none.
func (o organization) longestStanding(except uuid.UUID) (uuid.UUID, bool) {
	var (
		found uuid.UUID
		best  member
		ok    bool
	)
	for id, m := range o.members {
		if id == except {
			continue
		}
		if !ok || m.joinedAt.Before(best.joinedAt) || m.joinedAt.Equal(best.joinedAt) && m.since < best.since {
			found, best, ok = id, m, true
		}
	}
	return found, ok
}

// decideCreate creates an organization named name, already valid
// ([ValidName]), whose first owner is the account by.
func decideCreate(by uuid.UUID, name string) []any {
	return []any{Created{Name: name, CreatedBy: by}, MemberAdded{UserID: by, Role: RoleOwner}}
}

// invite is what [organization.decideInvite] decides on besides the
// state: the new invitation, and what the command found of its address.
type invite struct {
	id        uuid.UUID
	email     string // sealed for the invitation
	role      Role
	codeHash  string
	expiresAt time.Time
	// member says that the address's account is a member already.
	member bool
	// earlier are the invitations of the organization to the same
	// address, which the new one replaces.
	earlier []uuid.UUID
	// sentByOwner are the times, oldest first, of the invitations the
	// owner sent within the window, in any organization.
	sentByOwner []time.Time
}

// decideInvite sends the invitation in on behalf of the owner by, and
// voids the earlier ones to its address. It refuses an address whose
// account is a member, an organization that sent p.InvitationLimit
// invitations within p.InvitationWindow before now, and an owner that
// sent p.InvitationAccountLimit within it, in all its organizations.
func (o organization) decideInvite(by uuid.UUID, in invite, now time.Time, p Policy) ([]any, error) {
	if err := o.ownerOf(by); err != nil {
		return nil, err
	}
	if in.member {
		return nil, fmt.Errorf("%w: the address's account is a member of %s", ErrAlreadyMember, o.id)
	}
	wait := max(
		aggregate.Window{Limit: p.InvitationLimit, Per: p.InvitationWindow}.RetryAfter(o.sent, now),
		aggregate.Window{Limit: p.InvitationAccountLimit, Per: p.InvitationWindow}.RetryAfter(in.sentByOwner, now),
	)
	if wait > 0 {
		return nil, &TooManyInvitationsError{RetryAfter: wait}
	}
	var out []any
	for _, id := range in.earlier {
		if _, ok := o.invitations[id]; ok {
			out = append(out, InvitationVoided{InvitationID: id, Reason: VoidedReplaced})
		}
	}
	return append(out, InvitationSent{
		InvitationID: in.id, Email: in.email, Role: in.role, CodeHash: in.codeHash,
		ExpiresAt: in.expiresAt, InvitedBy: by,
	}), nil
}

// decideRevoke revokes the pending invitation id on behalf of the owner
// by. An invitation that is not pending at now is [ErrNotFound].
func (o organization) decideRevoke(by, id uuid.UUID, now time.Time) ([]any, error) {
	if err := o.ownerOf(by); err != nil {
		return nil, err
	}
	if _, ok := o.pending(id, now); !ok {
		return nil, fmt.Errorf("%w: no pending invitation %s in %s", ErrNotFound, id, o.id)
	}
	return []any{InvitationRevoked{InvitationID: id, By: by}}, nil
}

// acceptance is what [organization.decideAccept] decides on besides the
// state.
type acceptance struct {
	user       uuid.UUID
	invitation uuid.UUID
	codeHash   string
	// sameAddress says that the account's address is the invited one.
	sameAddress bool
	// orgs counts the organizations the account is a member of.
	orgs int
}

// decideAccept makes the account a.user a member by the code of the
// invitation a.invitation. It refuses, in this order, a code that is not
// that of a pending invitation, or of one whose inviter is no longer an
// owner ([ErrInvalidCode]), an account of another
// address ([ErrWrongAddress]), a member ([ErrAlreadyMember]), a full
// organization ([ErrFull]) and an account in too many
// ([ErrTooManyOrganizations]); a refusal uses nothing up.
func (o organization) decideAccept(a acceptance, now time.Time) ([]any, error) {
	inv, ok := o.pending(a.invitation, now)
	if !o.exists() || !ok || !sameHash(inv.codeHash, a.codeHash) {
		return nil, fmt.Errorf("%w: no pending invitation of the code", ErrInvalidCode)
	}
	// The end of the inviter's ownership voids its invitations
	// ([organization.voidSentBy]); a stream appended to before it did
	// may still hold one.
	if o.members[inv.invitedBy].role != RoleOwner {
		return nil, fmt.Errorf("%w: the inviter is no longer an owner of %s", ErrInvalidCode, o.id)
	}
	if !a.sameAddress {
		return nil, ErrWrongAddress
	}
	if _, ok := o.members[a.user]; ok {
		return nil, fmt.Errorf("%w: the account is a member of %s", ErrAlreadyMember, o.id)
	}
	if len(o.members) >= MaxMembers {
		return nil, fmt.Errorf("%w: %s has %d members", ErrFull, o.id, len(o.members))
	}
	if a.orgs >= MaxOrganizations {
		return nil, fmt.Errorf("%w: the account is a member of %d", ErrTooManyOrganizations, a.orgs)
	}
	return []any{
		InvitationAccepted{InvitationID: a.invitation, UserID: a.user},
		MemberAdded{UserID: a.user, Role: inv.role, InvitationID: a.invitation},
	}, nil
}

// decideChangeRole gives the member target the role on behalf of the
// owner by; the role it has already changes nothing. The last owner
// cannot be demoted ([ErrLastOwner]). A demoted owner's invitations
// pending at now are voided first.
func (o organization) decideChangeRole(by, target uuid.UUID, role Role, now time.Time) ([]any, error) {
	if err := o.ownerOf(by); err != nil {
		return nil, err
	}
	m, ok := o.members[target]
	if !ok {
		return nil, fmt.Errorf("%w: no member %s in %s", ErrNotFound, target, o.id)
	}
	if m.role == role {
		return nil, nil
	}
	if m.role == RoleOwner && o.owners() == 1 {
		return nil, fmt.Errorf("%w: %s would have no owner", ErrLastOwner, o.id)
	}
	var out []any
	if role != RoleOwner {
		out = o.voidSentBy(target, now, nil)
	}
	return append(out, RoleChanged{UserID: target, Role: role, By: by}), nil
}

// decideRemove removes the member target: on behalf of an owner by, or
// of target itself, which leaves. The last owner can neither leave nor
// be removed ([ErrLastOwner]). The member's invitations pending at now
// are voided first.
func (o organization) decideRemove(by, target uuid.UUID, now time.Time) ([]any, error) {
	reason := RemovedLeft
	if by != target {
		if err := o.ownerOf(by); err != nil {
			return nil, err
		}
		reason = RemovedByOwner
	}
	m, ok := o.members[target]
	if !o.exists() || !ok {
		return nil, fmt.Errorf("%w: no member %s in %s", ErrNotFound, target, o.id)
	}
	if m.role == RoleOwner && o.owners() == 1 {
		return nil, fmt.Errorf("%w: %s would have no owner", ErrLastOwner, o.id)
	}
	return append(o.voidSentBy(target, now, nil), MemberRemoved{UserID: target, Reason: reason, By: by}), nil
}

// decideDelete deletes the organization on behalf of the owner by,
// voiding every invitation still open, expired or not, so that their
// keys go at once.
func (o organization) decideDelete(by uuid.UUID) ([]any, error) {
	if err := o.ownerOf(by); err != nil {
		return nil, err
	}
	return append(o.voidOpen(VoidedDeleted), Deleted{By: by, Reason: DeletedByOwner}), nil
}

// voidOpen voids every invitation still open, for reason.
func (o organization) voidOpen(reason string) []any {
	var out []any
	for _, id := range o.open() {
		out = append(out, InvitationVoided{InvitationID: id, Reason: reason})
	}
	return out
}

// decideErase takes the erased account u out of the organization: it
// voids the invitations to its address that are still open, expired or
// not (invitations, found by the command), and, when u is a member,
// removes it, voiding first the invitations it sent that are pending at
// now. Where u was the last owner, the longest-standing other member
// becomes owner first, so that the organization never lacks one; where
// u was the last member, the organization is deleted, its other
// invitations voided with it. It decides nothing for an organization
// that is gone.
func (o organization) decideErase(u uuid.UUID, invitations []uuid.UUID, now time.Time) []any {
	if !o.exists() {
		return nil
	}
	var out []any
	for _, id := range invitations {
		if _, ok := o.invitations[id]; ok {
			out = append(out, InvitationVoided{InvitationID: id, Reason: VoidedErased})
		}
	}
	m, ok := o.members[u]
	if !ok {
		return out
	}
	next, others := o.longestStanding(u)
	if !others {
		out = append(out, MemberRemoved{UserID: u, Reason: RemovedErased})
		for _, id := range o.open() {
			if !slices.Contains(invitations, id) {
				out = append(out, InvitationVoided{InvitationID: id, Reason: VoidedDeleted})
			}
		}
		return append(out, Deleted{Reason: DeletedErased})
	}
	if m.role == RoleOwner && o.owners() == 1 {
		out = append(out, RoleChanged{UserID: next, Role: RoleOwner})
	}
	out = append(out, o.voidSentBy(u, now, invitations)...)
	return append(out, MemberRemoved{UserID: u, Reason: RemovedErased})
}
