package org

import (
	"context"
	"fmt"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
)

// ViewsProjection is the domain's inline projection: it decides what each
// event does to the [Views] and runs it there, in the transaction that
// appended the event. The service applies it to what each command
// appends, and a rebuild ([projections.Rebuild]) to the whole log.
//
// Keys opens the invited addresses ([Address]). An invitation whose
// address is erased adds no row: it was accepted, revoked, voided or
// swept since.
type ViewsProjection struct {
	Views Views
	Keys  *keyring.Keyring
}

// Name names the views.
func (ViewsProjection) Name() string { return "orgs" }

// Version numbers the views' shape.
func (ViewsProjection) Version() int { return 1 }

// Types returns the event types the views follow: every one of the
// domain.
func (ViewsProjection) Types() []string { return viewsHandlers.Types() }

// Reset empties the views as part of tx ([Views.Reset]).
func (p ViewsProjection) Reset(ctx context.Context, tx uow.Tx) error {
	if err := p.Views.Reset(ctx, tx); err != nil {
		return fmt.Errorf("org: views: %w", err)
	}
	return nil
}

// Apply updates the views with events appended in tx.
func (p ViewsProjection) Apply(ctx context.Context, tx uow.Tx, events ...eventstore.Event) error {
	for _, e := range events {
		if err := viewsHandlers.Apply(ctx, tx, p, e); err != nil {
			return fmt.Errorf("org: views: apply %s %s: %w", e.Type, e.ID, err)
		}
	}
	return nil
}

// viewsHandlers decide what each event does to the views, and run it
// there.
var viewsHandlers = func() *projections.Handlers[ViewsProjection] {
	h := projections.NewHandlers[ViewsProjection](events)
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, d Created) error {
		id, err := OrgOf(e)
		if err != nil {
			return err
		}
		return p.Views.PutOrganization(ctx, tx, OrganizationRow{ID: id, Name: d.Name, CreatedAt: e.RecordedAt})
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, d MemberAdded) error {
		id, err := OrgOf(e)
		if err != nil {
			return err
		}
		return p.Views.PutMember(ctx, tx, MemberRow{OrgID: id, UserID: d.UserID, Role: d.Role, JoinedAt: e.RecordedAt})
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, d RoleChanged) error {
		id, err := OrgOf(e)
		if err != nil {
			return err
		}
		return p.Views.SetRole(ctx, tx, id, d.UserID, d.Role)
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, d MemberRemoved) error {
		id, err := OrgOf(e)
		if err != nil {
			return err
		}
		return p.Views.DeleteMember(ctx, tx, id, d.UserID)
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, d InvitationSent) error {
		id, err := OrgOf(e)
		if err != nil {
			return err
		}
		// The sender's count outlives the invitation and its address.
		if err := p.Views.PutSent(ctx, tx, d.InvitationID, d.InvitedBy, e.RecordedAt); err != nil {
			return err
		}
		email, ok, err := Address(ctx, tx, p.Keys, d)
		if err != nil || !ok {
			return err
		}
		return p.Views.PutInvitation(ctx, tx, InvitationRow{
			ID: d.InvitationID, OrgID: id, CodeHash: d.CodeHash, Email: email, Role: d.Role,
			InvitedBy: d.InvitedBy, SentAt: e.RecordedAt, ExpiresAt: d.ExpiresAt,
		})
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, _ eventstore.Event, d InvitationRevoked) error {
		return p.Views.DeleteInvitation(ctx, tx, d.InvitationID)
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, _ eventstore.Event, d InvitationAccepted) error {
		return p.Views.DeleteInvitation(ctx, tx, d.InvitationID)
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, _ eventstore.Event, d InvitationVoided) error {
		return p.Views.DeleteInvitation(ctx, tx, d.InvitationID)
	})
	projections.Handle(h, func(ctx context.Context, tx uow.Tx, p ViewsProjection, e eventstore.Event, _ Deleted) error {
		id, err := OrgOf(e)
		if err != nil {
			return err
		}
		return p.Views.DeleteOrganization(ctx, tx, id)
	})
	return h
}()
