package outbox

import (
	"context"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/uow"
)

// Purger finds and deletes, as part of a unit of work, the messages of a
// person who is erased: the mail addressed to them and the events about
// them go with the rest of their data, in the unit of work that erases
// it. Both backends' stores have it; the relay does not use it.
type Purger interface {
	// Addressed returns the messages of topic, in any state, whose JSON
	// payload holds value in its top-level field, a key that
	// [CheckFields] accepts. It reads every message of the topic: it is
	// for an erasure, not for a hot path.
	Addressed(ctx context.Context, tx uow.Tx, topic, field, value string) ([]Message, error)
	// Delete deletes the messages with ids, and those whose Key is one of
	// keys, in any state, and returns how many it deleted. A message that
	// a relay holds meanwhile may still be delivered, once; its
	// settlement then finds no message, which is no error.
	Delete(ctx context.Context, tx uow.Tx, ids []uuid.UUID, keys []string) (int64, error)
}
