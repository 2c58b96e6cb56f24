package org

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Errors of the commands and queries, checked with errors.Is. A missing,
// ended or expired session is user.ErrUnauthenticated.
var (
	// ErrInvalidName is a name that is empty once trimmed, longer than
	// [MaxNameLength] characters, or not valid text.
	ErrInvalidName = errors.New("org: invalid name")
	// ErrInvalidRole is a role other than [RoleOwner] and [RoleMember].
	ErrInvalidRole = errors.New("org: invalid role")
	// ErrNotFound is an organization that does not exist or of which the
	// caller is not a member, or a member or invitation it does not hold:
	// a caller learns nothing of the organizations it is not in.
	ErrNotFound = errors.New("org: not found")
	// ErrNotOwner is a member asking for what only owners may do.
	ErrNotOwner = errors.New("org: owners only")
	// ErrAlreadyMember is an invitation of, or to, an address whose
	// account is a member already.
	ErrAlreadyMember = errors.New("org: already a member")
	// ErrLastOwner is the last owner leaving, being removed or demoted:
	// an organization always has an owner.
	ErrLastOwner = errors.New("org: the last owner")
	// ErrTooManyOrganizations is an account at [MaxOrganizations] asked
	// to create or join another.
	ErrTooManyOrganizations = errors.New("org: too many organizations")
	// ErrFull is an organization at [MaxMembers].
	ErrFull = errors.New("org: organization full")
	// ErrInvalidCode is an unknown, used, expired, revoked or voided
	// invitation code.
	ErrInvalidCode = errors.New("org: invalid invitation code")
	// ErrWrongAddress is an invitation accepted with the session of an
	// account whose address is not the invited one; the code stays
	// usable.
	ErrWrongAddress = errors.New("org: invitation for another address")
	// ErrTooManyInvitations is an organization that sent
	// [Policy.InvitationLimit] invitations within the window, or an
	// owner that sent [Policy.InvitationAccountLimit]; the error is a
	// [*TooManyInvitationsError].
	ErrTooManyInvitations = errors.New("org: too many invitations")
)

// TooManyInvitationsError says how long an organization, or an owner,
// must wait before it may invite again.
type TooManyInvitationsError struct {
	RetryAfter time.Duration
}

func (e *TooManyInvitationsError) Error() string {
	return fmt.Sprintf("org: too many invitations; retry after %s", e.RetryAfter.Round(time.Second))
}

// Is makes errors.Is(err, ErrTooManyInvitations) true.
func (e *TooManyInvitationsError) Is(target error) bool { return target == ErrTooManyInvitations }

// The limits of the domain.
const (
	// MaxNameLength is the most characters (Unicode code points) a name
	// may have once trimmed.
	MaxNameLength = 100
	// MaxOrganizations is the most organizations one account may belong
	// to.
	MaxOrganizations = 100
	// MaxMembers is the most members one organization may hold.
	MaxMembers = 1000
)

// Role is a member's role in an organization.
type Role string

// The roles. An owner invites, revokes invitations, changes roles, removes
// members and deletes the organization; a member sees it and may leave.
const (
	RoleOwner  Role = "owner"
	RoleMember Role = "member"
)

// ParseRole returns the role s names, or an error wrapping
// [ErrInvalidRole].
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleOwner, RoleMember:
		return r, nil
	}
	return "", fmt.Errorf("%w: %q is neither owner nor member", ErrInvalidRole, s)
}

// Organization is an organization as one of its members sees it.
type Organization struct {
	ID        uuid.UUID
	Name      string
	CreatedAt time.Time
	// Role is the role of the member who asked.
	Role Role
}

// Member is a member of an organization.
type Member struct {
	UserID uuid.UUID
	// Email is the member's account's address now.
	Email    string
	Role     Role
	JoinedAt time.Time
}

// Details is an organization with its members, oldest first.
type Details struct {
	Organization
	Members []Member
}

// Invitation is a pending invitation, as the organization's owners see
// it.
type Invitation struct {
	ID        uuid.UUID
	Email     string
	Role      Role
	InvitedBy uuid.UUID
	SentAt    time.Time
	ExpiresAt time.Time
}

// InvitationOffer is what an invitation code offers, as the page its link
// opens shows it before it is accepted: the organization, by its ID and
// name, the role, the invited address and the expiry.
type InvitationOffer struct {
	OrgID     uuid.UUID
	OrgName   string
	Role      Role
	Email     string
	ExpiresAt time.Time
}

// Membership is the membership that accepting an invitation made.
type Membership struct {
	Organization Organization
	UserID       uuid.UUID
	JoinedAt     time.Time
}
