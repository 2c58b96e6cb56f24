package user

import (
	"context"

	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/integration"
)

// WithIntegrationEvents makes the service add the integration events of
// each command ([integration.Types]) to the outbox, in the command's unit
// of work, for every destination of e. Give it only when the relay has a
// handler for each destination's topics ([publish.Topic] of each of
// [integration.Types]); without it no integration event is added.
func WithIntegrationEvents(e publish.Events) Option {
	return func(s *Service) { s.integration = e }
}

// publish adds the integration event e to the outbox, for each configured
// destination. The commands make e from their domain events with the
// functions of integrationmapping.go.
func (s *Service) publish(ctx context.Context, tx uow.Tx, e integration.Event) error {
	msgs, err := s.integration.Messages(e.Type(), e.Subject(), e, tx.Now())
	if err != nil || len(msgs) == 0 {
		return err
	}
	return s.Outbox.Add(ctx, tx, msgs...)
}
