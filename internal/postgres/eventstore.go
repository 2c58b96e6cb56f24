package postgres

import (
	"context"
	"errors"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// EventStore is the [eventstore.Store] of this backend.
type EventStore struct{}

var _ eventstore.Store = (*EventStore)(nil)

var errTODO = errors.New("postgres: event store not implemented yet")

func (s *EventStore) Append(ctx context.Context, t uow.Tx, stream string, expected eventstore.Expected, events ...eventstore.Event) ([]eventstore.Event, error) {
	return nil, errTODO
}

func (s *EventStore) Load(ctx context.Context, t uow.Tx, stream string, from int64) ([]eventstore.Event, error) {
	return nil, errTODO
}

func (s *EventStore) ReadAll(ctx context.Context, t uow.Tx, after eventstore.Position, limit int) ([]eventstore.Event, error) {
	return nil, errTODO
}
