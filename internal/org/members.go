package org

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/uow"
)

// The events of an organization's members.
const (
	TypeMemberAdded   = "org.member_added"
	TypeRoleChanged   = "org.role_changed"
	TypeMemberRemoved = "org.member_removed"
)

// MemberAdded records that an account became a member with a role: the
// creator, as the first owner, or an invited address's account, which
// accepted the invitation InvitationID (zero for the creator).
type MemberAdded struct {
	UserID       uuid.UUID `json:"user_id"`
	Role         Role      `json:"role"`
	InvitationID uuid.UUID `json:"invitation_id,omitzero"`
}

// RoleChanged records a member's new role. By is the owner who changed
// it, zero when the service made the longest-standing member owner
// because the last owner's account was erased.
type RoleChanged struct {
	UserID uuid.UUID `json:"user_id"`
	Role   Role      `json:"role"`
	By     uuid.UUID `json:"by,omitzero"`
}

// The reasons of a [MemberRemoved].
const (
	// RemovedByOwner is an owner's removal of another member.
	RemovedByOwner = "removed"
	// RemovedLeft is a member who left.
	RemovedLeft = "left"
	// RemovedErased is a member whose account was erased.
	RemovedErased = "erased"
)

// MemberRemoved records that an account is no longer a member, for
// Reason. By is the owner who removed it, the member who left, or zero
// for an erasure. It ends nothing of the account.
type MemberRemoved struct {
	UserID uuid.UUID `json:"user_id"`
	Reason string    `json:"reason"`
	By     uuid.UUID `json:"by,omitzero"`
}

// ChangeRole gives the member the role, on behalf of an owner of the
// organization id, and returns the member as it is then. A demoted
// owner's pending invitations are voided: their codes stop working,
// their keys are forgotten and their mail deleted. It returns an
// error wrapping [ErrInvalidRole], [ErrNotFound] (for an unknown member
// too), [ErrNotOwner], and [ErrLastOwner] for the demotion of the last
// owner.
func (s *Service) ChangeRole(ctx context.Context, token string, id, member uuid.UUID, role Role) (Member, error) {
	role, err := ParseRole(string(role))
	if err != nil {
		return Member{}, err
	}
	var m Member
	err = s.commands.Do(ctx, "org.ChangeRole", func(ctx context.Context, tx uow.Tx) error {
		u, err := s.Users.Authenticate(ctx, tx, token)
		if err != nil {
			return err
		}
		if err := s.memberOf(ctx, tx, id, u.ID); err != nil {
			return err
		}
		o, err := s.load(ctx, tx, id)
		if err != nil {
			return err
		}
		data, err := o.decideChangeRole(u.ID, member, role, tx.Now())
		if err != nil {
			return err
		}
		if _, err := s.apply(ctx, tx, o, data...); err != nil {
			return err
		}
		_, m, err = s.membersAs(ctx, tx, id, member)
		return err
	})
	return m, err
}

// RemoveMember takes the member out of the organization id: an owner
// removes anyone, and any member removes itself, which is leaving. It
// ends nothing of the member's account; the invitations it sent that
// are still pending are voided, as a demotion voids them
// ([Service.ChangeRole]). It returns [ErrNotFound] (for an
// unknown member too), [ErrNotOwner], and [ErrLastOwner] for the last
// owner, who can neither leave nor be removed.
func (s *Service) RemoveMember(ctx context.Context, token string, id, member uuid.UUID) error {
	return s.decideAs(ctx, "org.RemoveMember", token, id, func(o organization, by uuid.UUID, now time.Time) ([]any, error) {
		return o.decideRemove(by, member, now)
	})
}
