package org

import (
	"context"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/org/integration"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/uow"
)

// WithIntegrationEvents makes the service add the integration events of
// each command ([integration.Types]) to the outbox, in the command's unit
// of work, for every destination of e: the member_added of Create and
// Accept, the role_changed of ChangeRole, the member_removed of
// RemoveMember (removed or left), the deleted of Delete, and those of an
// account's erasure ([Service.Erased]: its leaves, the promotions of the
// longest-standing members, the deletions of the organizations it was
// the last member of). Give it only when the relay has a handler for each
// destination's topics ([publish.Topic] of each of [integration.Types]);
// without it no integration event is added.
//
// The events are keyed ([publish.Events.Messages]) by the organization's
// ID, their subject, and not by a member's: the erasure of an account
// deletes the integration events about it that are still in the outbox,
// those keyed by its ID (user.Service.DeleteAccount), and leaves the
// organizations' alone, so that an organization's events stay whole and
// in order whoever among its members is erased.
//
// So an erased account's member_added that is not yet delivered stays,
// and goes out before the member_removed (reason "erased") that the
// erasure adds behind it under the same key. That is deliberate. It
// holds no address, only the account's ID, which the account's
// com.github.eventsourced.accounts.user.deleted.v1 tells consumers to
// forget. Dropping it would leave a consumer the removal of a member it
// never saw added, and, were the account the creator, an organization
// whose first event is lost; keeping it, the consumer sees the
// membership begin and end, in the order of the organization's stream,
// and ends where the service is.
func WithIntegrationEvents(e publish.Events) Option {
	return func(s *Service) { s.integration = e }
}

// publish adds the integration events of appended, the events of the
// organization id's stream as a command appended them with data, to the
// outbox, in the order of the stream.
func (s *Service) publish(ctx context.Context, tx uow.Tx, id uuid.UUID, appended []eventstore.Event, data []any) error {
	if !s.integration.Enabled() {
		return nil
	}
	for i, d := range data {
		e, err := integrationEvent(id, d, appended[i].Version)
		if err != nil {
			return err
		}
		if e == nil {
			continue
		}
		if err := s.add(ctx, tx, e); err != nil {
			return err
		}
	}
	return nil
}

// add adds the integration event e to the outbox, for each configured
// destination, keyed by its subject, the organization.
func (s *Service) add(ctx context.Context, tx uow.Tx, e integration.Event) error {
	msgs, err := s.integration.Messages(e.Type(), e.Subject(), e, tx.Now())
	if err != nil {
		return err
	}
	return s.Outbox.Add(ctx, tx, msgs...)
}
