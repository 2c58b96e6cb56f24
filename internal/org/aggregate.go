package org

import (
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/aggregate"
	"github.com/eventsourced/accounts/internal/eventstore"
)

// organization is the state of one organization's stream, as its
// commands decide on it (decide.go): the whole stream folded, which stays
// short, since it grows only with what its owners and members do.
type organization struct {
	id      uuid.UUID
	version int64
	// created says that the stream began; a stream without events is no
	// organization.
	created   bool
	name      string
	createdAt time.Time
	deleted   bool
	members   map[uuid.UUID]member
	// invitations are those sent and not accepted, revoked or voided,
	// expired ones included ([organization.pending]).
	invitations map[uuid.UUID]invitation
	// sent are the times of every invitation sent, for the limit.
	sent []time.Time
}

type member struct {
	role     Role
	joinedAt time.Time
	// since is the version of the [MemberAdded]: of two members who
	// joined at one time, the one added first has stood the longest.
	since int64
}

type invitation struct {
	codeHash  string
	role      Role
	sentAt    time.Time
	expiresAt time.Time
	// invitedBy is the owner who sent it: it works only while that
	// member is an owner.
	invitedBy uuid.UUID
}

// newOrganization is the state of the stream of id before its first
// event.
func newOrganization(id uuid.UUID) organization {
	return organization{id: id, members: map[uuid.UUID]member{}, invitations: map[uuid.UUID]invitation{}}
}

// foldOrganization returns the state of the stream of id from all its
// events.
func foldOrganization(id uuid.UUID, events []eventstore.Event) (organization, error) {
	o, err := orgFold.Run(newOrganization(id), events...)
	if err != nil {
		return o, err
	}
	if n := len(events); n > 0 {
		o.version = events[n-1].Version
	}
	return o, nil
}

// orgFold is the evolve of an organization's stream.
var orgFold = func() *aggregate.Fold[organization] {
	f := aggregate.NewFold[organization](events)
	aggregate.On(f, func(o organization, e eventstore.Event, d Created) organization {
		o.created, o.name, o.createdAt = true, d.Name, e.RecordedAt
		return o
	})
	aggregate.On(f, func(o organization, e eventstore.Event, d MemberAdded) organization {
		o.members[d.UserID] = member{role: d.Role, joinedAt: e.RecordedAt, since: e.Version}
		return o
	})
	aggregate.On(f, func(o organization, _ eventstore.Event, d RoleChanged) organization {
		if m, ok := o.members[d.UserID]; ok {
			m.role = d.Role
			o.members[d.UserID] = m
		}
		return o
	})
	aggregate.On(f, func(o organization, _ eventstore.Event, d MemberRemoved) organization {
		delete(o.members, d.UserID)
		return o
	})
	aggregate.On(f, func(o organization, e eventstore.Event, d InvitationSent) organization {
		o.invitations[d.InvitationID] = invitation{
			codeHash: d.CodeHash, role: d.Role, sentAt: e.RecordedAt, expiresAt: d.ExpiresAt, invitedBy: d.InvitedBy,
		}
		o.sent = append(o.sent, e.RecordedAt)
		return o
	})
	aggregate.On(f, func(o organization, _ eventstore.Event, d InvitationRevoked) organization {
		delete(o.invitations, d.InvitationID)
		return o
	})
	aggregate.On(f, func(o organization, _ eventstore.Event, d InvitationAccepted) organization {
		delete(o.invitations, d.InvitationID)
		return o
	})
	aggregate.On(f, func(o organization, _ eventstore.Event, d InvitationVoided) organization {
		delete(o.invitations, d.InvitationID)
		return o
	})
	aggregate.On(f, func(o organization, _ eventstore.Event, _ Deleted) organization {
		o.deleted = true
		clear(o.members)
		clear(o.invitations)
		return o
	})
	return f
}()
