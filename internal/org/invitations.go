package org

import (
	"time"

	"github.com/google/uuid"
)

// The events of an organization's invitations, but their acceptance
// (accept.go).
const (
	TypeInvitationSent    = "org.invitation_sent"
	TypeInvitationRevoked = "org.invitation_revoked"
	TypeInvitationVoided  = "org.invitation_voided"
)

// InvitationSent records an invitation mailed to an address, with a
// one-time code that makes its account a member with Role, until
// ExpiresAt. Email is sealed for the invitation alone
// ("invitation-ID", personal.go); only the code's hash is kept.
type InvitationSent struct {
	InvitationID uuid.UUID `json:"invitation_id"`
	Email        string    `json:"email"`
	Role         Role      `json:"role"`
	CodeHash     string    `json:"code_hash"`
	ExpiresAt    time.Time `json:"expires_at"`
	InvitedBy    uuid.UUID `json:"invited_by"`
}

// InvitationRevoked records that the owner By revoked a pending
// invitation: its code no longer works.
type InvitationRevoked struct {
	InvitationID uuid.UUID `json:"invitation_id"`
	By           uuid.UUID `json:"by"`
}

// The reasons of an [InvitationVoided].
const (
	// VoidedErased is the erasure of the invited address's account.
	VoidedErased = "erased"
	// VoidedReplaced is a newer invitation to the same address.
	VoidedReplaced = "replaced"
	// VoidedDeleted is the deletion of the organization.
	VoidedDeleted = "deleted"
)

// InvitationVoided records that a pending invitation no longer works, for
// Reason, though nobody revoked it.
type InvitationVoided struct {
	InvitationID uuid.UUID `json:"invitation_id"`
	Reason       string    `json:"reason"`
}
