package integration

import "github.com/google/uuid"

// Event is the data of an integration event, as the CloudEvent's data in
// JSON. Its Go type names its CloudEvents type.
type Event interface {
	// Type returns the event's CloudEvents type, one of [Types].
	Type() string
	// Subject returns what the event is about, its CloudEvents subject:
	// the organization's ID.
	Subject() string
}

// Every event names its type.
var (
	_ Event = MemberAdded{}
	_ Event = RoleChanged{}
	_ Event = MemberRemoved{}
	_ Event = Deleted{}
)

// The roles of a member, as [MemberAdded] and [RoleChanged] name them.
const (
	RoleOwner  = "owner"
	RoleMember = "member"
)

// MemberAdded is the data of [TypeMemberAdded]: the account UserID became
// a member of the organization with Role, as its creator (the first
// owner, at version 2) or by accepting an invitation.
type MemberAdded struct {
	OrganizationID uuid.UUID `json:"organization_id"`
	UserID         uuid.UUID `json:"user_id"`
	// Role is [RoleOwner] or [RoleMember].
	Role string `json:"role"`
	// Version is the organization stream's version after the change: a
	// consumer that has seen a higher one for this organization has seen
	// a later change. Versions have gaps, as the stream's other events
	// (its creation, its invitations) are not published. Every event has
	// it.
	Version int64 `json:"version"`
}

// Type returns [TypeMemberAdded].
func (MemberAdded) Type() string { return TypeMemberAdded }

// Subject returns the organization's ID.
func (e MemberAdded) Subject() string { return e.OrganizationID.String() }

// RoleChanged is the data of [TypeRoleChanged]: the member UserID's role
// is now Role.
type RoleChanged struct {
	OrganizationID uuid.UUID `json:"organization_id"`
	UserID         uuid.UUID `json:"user_id"`
	Role           string    `json:"role"`
	Version        int64     `json:"version"`
}

// Type returns [TypeRoleChanged].
func (RoleChanged) Type() string { return TypeRoleChanged }

// Subject returns the organization's ID.
func (e RoleChanged) Subject() string { return e.OrganizationID.String() }

// The reasons of a [MemberRemoved].
const (
	// ReasonRemoved is an owner's removal of another member.
	ReasonRemoved = "removed"
	// ReasonLeft is a member who left.
	ReasonLeft = "left"
	// ReasonErased is a member whose account was erased; the account's
	// com.github.eventsourced.accounts.user.deleted.v1 says so too, in
	// the order of the account's events, which has none with the
	// organization's.
	ReasonErased = "erased"
)

// MemberRemoved is the data of [TypeMemberRemoved]: the account UserID is
// no longer a member, for Reason. Nothing else of the account ends.
type MemberRemoved struct {
	OrganizationID uuid.UUID `json:"organization_id"`
	UserID         uuid.UUID `json:"user_id"`
	// Reason is [ReasonRemoved], [ReasonLeft] or [ReasonErased].
	Reason  string `json:"reason"`
	Version int64  `json:"version"`
}

// Type returns [TypeMemberRemoved].
func (MemberRemoved) Type() string { return TypeMemberRemoved }

// Subject returns the organization's ID.
func (e MemberRemoved) Subject() string { return e.OrganizationID.String() }

// The reasons of a [Deleted].
const (
	// ReasonDeleted is an owner's deletion.
	ReasonDeleted = "deleted"
	// ReasonLastMemberErased is the erasure of the last member's account,
	// whose [MemberRemoved] comes just before.
	ReasonLastMemberErased = "erased"
)

// Deleted is the data of [TypeDeleted]: the organization was deleted,
// for Reason, and was the last event of its stream. Every membership
// ends with it: no [MemberRemoved] is published for the members it had.
type Deleted struct {
	OrganizationID uuid.UUID `json:"organization_id"`
	// Reason is [ReasonDeleted] or [ReasonLastMemberErased].
	Reason  string `json:"reason"`
	Version int64  `json:"version"`
}

// Type returns [TypeDeleted].
func (Deleted) Type() string { return TypeDeleted }

// Subject returns the organization's ID.
func (e Deleted) Subject() string { return e.OrganizationID.String() }
