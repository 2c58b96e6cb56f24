package org

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org/integration"
)

// The mapping from domain events to integration events: one function per
// integration event, from the domain event that causes it, the
// organization whose stream it was appended to (which the event leaves to
// its stream, [OrgOf]) and the version it was appended at. Each is tested
// against its event's JSON Schema under schemas/.

// integrationEvent returns the integration event of d, the data of an
// event appended at version to the stream of the organization id, or nil
// for the events that publish none. Every type of the domain is decided
// here: one it does not name is an error, not a silence.
func integrationEvent(id uuid.UUID, d any, version int64) (integration.Event, error) {
	switch d := d.(type) {
	case MemberAdded:
		return memberAdded(id, d, version), nil
	case RoleChanged:
		return roleChanged(id, d, version), nil
	case MemberRemoved:
		return memberRemoved(id, d, version), nil
	case Deleted:
		return deleted(id, d, version), nil
	case Created:
		// The creator's MemberAdded, appended with it, is the first
		// published event of an organization.
		return nil, nil
	case InvitationSent, InvitationRevoked, InvitationAccepted, InvitationVoided:
		// An invitation is to an address, which no integration event
		// holds; its acceptance publishes the MemberAdded that follows
		// it.
		return nil, nil
	}
	return nil, fmt.Errorf("org: no integration event decided for %T", d)
}

// memberAdded is the integration event of e, an account that became a
// member of the organization id, appended at version.
func memberAdded(id uuid.UUID, e MemberAdded, version int64) integration.MemberAdded {
	return integration.MemberAdded{OrganizationID: id, UserID: e.UserID, Role: string(e.Role), Version: version}
}

// roleChanged is the integration event of e, a member's new role in the
// organization id, appended at version.
func roleChanged(id uuid.UUID, e RoleChanged, version int64) integration.RoleChanged {
	return integration.RoleChanged{OrganizationID: id, UserID: e.UserID, Role: string(e.Role), Version: version}
}

// memberRemoved is the integration event of e, an account that is no
// longer a member of the organization id, appended at version.
func memberRemoved(id uuid.UUID, e MemberRemoved, version int64) integration.MemberRemoved {
	return integration.MemberRemoved{OrganizationID: id, UserID: e.UserID, Reason: e.Reason, Version: version}
}

// deleted is the integration event of e, the deletion of the
// organization id, appended at version.
func deleted(id uuid.UUID, e Deleted, version int64) integration.Deleted {
	return integration.Deleted{OrganizationID: id, Reason: e.Reason, Version: version}
}
