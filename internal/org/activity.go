package org

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// The kinds of an account's activity that organizations make
// ([user.Activity.Type]): the account's own joins, leaves and changes of
// role, and the deletion of an organization it was in. The removal of an
// erased account makes none, since the erasure deletes the account's
// activity.
//
// Detail is the organization's ID, then, for the kinds that give the
// account a role (created, joined, role changed), that role, then the
// organization's name, separated by single spaces ([ActivityDetail]): the
// name is last, since it may hold spaces. The ID tells one organization
// from another of the same name and leads to it (GET /v1/orgs/{id}) while
// the account is a member. The name is what makes the line readable
// after the account has left, or the organization has gone. It is what
// an owner typed, and may say something of a person; but the account saw
// it as a member, it is shown to that account alone, and it is the name
// the organization's first event holds, which the log keeps for as long
// as it keeps the organization's events, which an erasure leaves: the
// activity, which a rebuild makes again from the log, keeps it no longer
// than the log does, and the account's erasure deletes it with the rest.
// Who removed the account, or deleted the organization, is left out:
// another account's ID says nothing to the reader, and its address would
// be that person's.
const (
	// ActivityCreated is the creation of an organization, whose first
	// owner the account became.
	ActivityCreated = "org_created"
	// ActivityJoined is the account's acceptance of an invitation, which
	// made it a member with the role the invitation offered.
	ActivityJoined = "org_joined"
	// ActivityRoleChanged is a change of the account's role: by an
	// owner, or by the service, which makes the longest-standing member
	// owner when the last owner's account is erased.
	ActivityRoleChanged = "org_role_changed"
	// ActivityLeft is the account leaving an organization.
	ActivityLeft = "org_left"
	// ActivityRemoved is the account's removal by an owner.
	ActivityRemoved = "org_removed"
	// ActivityDeleted is the deletion of an organization the account was
	// a member of, by an owner, who may be the account itself.
	ActivityDeleted = "org_deleted"
)

// ActivityDetail is what the Detail of a kind of activity of
// organizations says.
type ActivityDetail struct {
	Org  uuid.UUID
	Name string
	// Role is the role the account holds from then on; empty for the
	// kinds that end its membership.
	Role Role
}

// String returns the Detail d is: the ID, the role if any, and the name,
// separated by single spaces.
func (d ActivityDetail) String() string {
	if d.Role == "" {
		return d.Org.String() + " " + d.Name
	}
	return d.Org.String() + " " + string(d.Role) + " " + d.Name
}

// ParseActivityDetail returns what detail, the Detail of an activity of
// the kind typ, says, and an error for a kind of no organization's, or a
// detail that is not of its form.
func ParseActivityDetail(typ, detail string) (ActivityDetail, error) {
	fields := 2
	switch typ {
	case ActivityCreated, ActivityJoined, ActivityRoleChanged:
		fields = 3
	case ActivityLeft, ActivityRemoved, ActivityDeleted:
	default:
		return ActivityDetail{}, fmt.Errorf("org: %q is no kind of activity of organizations", typ)
	}
	parts := strings.SplitN(detail, " ", fields)
	if len(parts) != fields {
		return ActivityDetail{}, fmt.Errorf("org: the detail of %s %q has %d fields, want %d", typ, detail, len(parts), fields)
	}
	var d ActivityDetail
	id, err := uuid.Parse(parts[0])
	if err != nil || id.String() != parts[0] {
		return ActivityDetail{}, fmt.Errorf("org: the detail of %s %q: not an organization's ID", typ, detail)
	}
	d.Org, d.Name = id, parts[fields-1]
	if fields == 3 {
		if d.Role, err = ParseRole(parts[1]); err != nil {
			return ActivityDetail{}, fmt.Errorf("org: the detail of %s %q: %w", typ, detail, err)
		}
	}
	if _, err := ValidName(d.Name); err != nil {
		return ActivityDetail{}, fmt.Errorf("org: the detail of %s %q: %w", typ, detail, err)
	}
	return d, nil
}

// ActivitySource is the organizations' part of accounts' activity
// ([user.ActivitySource]), which the app gives the user domain's
// activity projection: it makes the rows of the kinds above from the
// member events and the deletions of organizations' streams.
//
// What an event says of its organization as it stood before it (its
// name; its members, whom a deletion does not list) is read from the
// organization's stream, folded up to the event, in the subscriber's
// transaction. The views will not do: the projection runs behind the
// commands, and a rebuild long after them, when the views hold the
// organization as it is now, or nothing of one deleted since; the
// stream's events before the event are the same whenever it is read.
// Each organization's stream is read once a batch.
type ActivitySource struct {
	// Events is the event store of the organizations' streams.
	Events eventstore.Store
}

var _ user.ActivitySource = ActivitySource{}

// ActivityTypes returns the event types that make activity: those of the
// members and of the deletion.
func (ActivitySource) ActivityTypes() []string { return activityHandlers.Types() }

// Activity returns the rows that events add to their accounts'
// activity, in their order, as [user.ActivitySource] describes. It
// returns an error for an event whose stream does not hold it at its
// version.
func (s ActivitySource) Activity(ctx context.Context, tx uow.Tx, events []eventstore.Event) ([]user.ActivityRow, error) {
	streams := map[uuid.UUID]*foldedStream{}
	var rows []user.ActivityRow
	for _, e := range events {
		id, err := OrgOf(e)
		if err != nil {
			return nil, fmt.Errorf("org: activity: %w", err)
		}
		st, ok := streams[id]
		if !ok {
			loaded, err := s.Events.Load(ctx, tx, streamOf(id), 0)
			if err != nil {
				return nil, fmt.Errorf("org: activity: %w", err)
			}
			st = &foldedStream{id: id, events: loaded, state: newOrganization(id)}
			streams[id] = st
		}
		o, err := st.before(e)
		if err != nil {
			return nil, fmt.Errorf("org: activity: %s %s: %w", e.Type, e.ID, err)
		}
		a := &activityOf{org: o, event: e}
		if err := activityHandlers.Apply(ctx, tx, a, e); err != nil {
			return nil, fmt.Errorf("org: activity: %s %s: %w", e.Type, e.ID, err)
		}
		rows = append(rows, a.rows...)
	}
	return rows, nil
}

// foldedStream is an organization's stream as loaded, and its state
// folded up to some version of it.
type foldedStream struct {
	id     uuid.UUID
	events []eventstore.Event
	state  organization
}

// before returns the organization as it stood before e, an event of its
// stream: its events before e's version, folded on from the state
// folded so far, which the events of a batch, in stream order, reuse.
func (st *foldedStream) before(e eventstore.Event) (organization, error) {
	if e.Version < 1 || int64(len(st.events)) < e.Version || st.events[e.Version-1].ID != e.ID {
		return organization{}, fmt.Errorf("the stream %s does not hold the event at version %d", streamOf(st.id), e.Version)
	}
	if st.state.version >= e.Version {
		st.state = newOrganization(st.id)
	}
	o, err := orgFold.Run(st.state, st.events[st.state.version:e.Version-1]...)
	if err != nil {
		return organization{}, err
	}
	o.version = e.Version - 1
	st.state = o
	if !o.created {
		return organization{}, fmt.Errorf("the stream %s has no %s before it", streamOf(st.id), TypeCreated)
	}
	return o, nil
}

// activityOf is the activity of one event: the organization before it,
// and the rows it makes.
type activityOf struct {
	org   organization
	event eventstore.Event
	rows  []user.ActivityRow
}

// add adds a row of the kind typ of the account id, whose role is role
// from then on ("" for none).
func (a *activityOf) add(id uuid.UUID, typ string, role Role) error {
	if id == uuid.Nil {
		return errors.New("no user_id")
	}
	detail := ActivityDetail{Org: a.org.id, Name: a.org.name, Role: role}
	a.rows = append(a.rows, user.ActivityRow{UserID: id, Activity: user.Activity{
		Type: typ, At: a.event.RecordedAt, Detail: detail.String(), Position: a.event.Position,
	}})
	return nil
}

// activityHandlers decide what each event of an organization's stream
// adds to its members' activity.
var activityHandlers = func() *projections.Handlers[*activityOf] {
	h := projections.NewHandlers[*activityOf](events)
	projections.Handle(h, func(_ context.Context, _ uow.Tx, a *activityOf, _ eventstore.Event, d MemberAdded) error {
		if d.InvitationID == uuid.Nil {
			return a.add(d.UserID, ActivityCreated, d.Role)
		}
		return a.add(d.UserID, ActivityJoined, d.Role)
	})
	projections.Handle(h, func(_ context.Context, _ uow.Tx, a *activityOf, _ eventstore.Event, d RoleChanged) error {
		return a.add(d.UserID, ActivityRoleChanged, d.Role)
	})
	projections.Handle(h, func(_ context.Context, _ uow.Tx, a *activityOf, _ eventstore.Event, d MemberRemoved) error {
		switch d.Reason {
		case RemovedLeft:
			return a.add(d.UserID, ActivityLeft, "")
		case RemovedByOwner:
			return a.add(d.UserID, ActivityRemoved, "")
		case RemovedErased:
			// The erasure deletes the account's activity.
			return nil
		}
		return fmt.Errorf("a removal for the unknown reason %q", d.Reason)
	})
	// A deletion lists no members: they are those of the organization
	// before it, in the order of their IDs. One whose account was erased
	// was removed before it.
	projections.Handle(h, func(_ context.Context, _ uow.Tx, a *activityOf, _ eventstore.Event, _ Deleted) error {
		ids := make([]uuid.UUID, 0, len(a.org.members))
		for id := range a.org.members {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) })
		for _, id := range ids {
			if err := a.add(id, ActivityDeleted, ""); err != nil {
				return err
			}
		}
		return nil
	})
	// The creation's first owner is its MemberAdded's; an invitation
	// makes a member only once accepted, which the MemberAdded after the
	// acceptance records.
	projections.Skip[Created](h)
	projections.Skip[InvitationSent](h)
	projections.Skip[InvitationRevoked](h)
	projections.Skip[InvitationAccepted](h)
	projections.Skip[InvitationVoided](h)
	return h
}()
