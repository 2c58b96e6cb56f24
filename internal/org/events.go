package org

import (
	"github.com/eventsourced/accounts/internal/eventstore"
)

// events names every event type of the domain once, with its Go type, its
// schema version and the upcasters of its older versions. Every type is
// of the category "org", the kind of an organization's stream
// ("org-ID"); the fold of the aggregate and the views projection decode
// events through it, and handle every type. Each type is defined beside
// the commands that append it (organizations.go, members.go,
// invitations.go, accept.go).
var events = registerEvents()

func registerEvents() *eventstore.Registry {
	r := eventstore.NewRegistry()
	eventstore.Register[Created](r, TypeCreated)
	eventstore.Register[MemberAdded](r, TypeMemberAdded)
	eventstore.Register[RoleChanged](r, TypeRoleChanged)
	eventstore.Register[MemberRemoved](r, TypeMemberRemoved)
	eventstore.Register[InvitationSent](r, TypeInvitationSent)
	eventstore.Register[InvitationRevoked](r, TypeInvitationRevoked)
	eventstore.Register[InvitationAccepted](r, TypeInvitationAccepted)
	eventstore.Register[InvitationVoided](r, TypeInvitationVoided)
	eventstore.Register[Deleted](r, TypeDeleted)
	return r
}

// CategoryOrg is the category of the domain's event types, and of its
// streams.
const CategoryOrg = "org"

// Events returns the registry of the domain's event types. It is read
// only: registering more in it is a bug.
func Events() *eventstore.Registry { return events }

// Decode returns the data of e, one of the domain's events, upcast to its
// type's current version, as a T.
func Decode[T any](e eventstore.Event) (T, error) { return eventstore.Decode[T](events, e) }
