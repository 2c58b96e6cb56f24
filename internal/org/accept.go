package org

import (
	"github.com/google/uuid"
)

// TypeInvitationAccepted is the event of an accepted invitation. The
// [MemberAdded] of the account that accepted it follows it.
const TypeInvitationAccepted = "org.invitation_accepted"

// InvitationAccepted records that the account UserID, whose address is
// the invited one, used the invitation's code.
type InvitationAccepted struct {
	InvitationID uuid.UUID `json:"invitation_id"`
	UserID       uuid.UUID `json:"user_id"`
}
