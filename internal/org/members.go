package org

import (
	"github.com/google/uuid"
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
