package outbox

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Operator is what an operator does to an outbox store beside what the
// relay does: inspect its messages, give a buried one another chance, and
// throw buried ones away or strip their secrets. The relay never calls it;
// the operators' commands and the sweeps do. Both backends' stores have it.
type Operator interface {
	// Buried returns up to limit buried messages, oldest burial first.
	Buried(ctx context.Context, limit int) ([]Record, error)
	// Lookup returns the message with id as the store holds it, or an error
	// wrapping [ErrNotFound].
	Lookup(ctx context.Context, id uuid.UUID) (Record, error)
	// List returns the messages that f admits, earliest due first.
	List(ctx context.Context, f ListFilter) ([]Record, error)
	// Discard deletes a buried message; one still to deliver is an error
	// wrapping [ErrNotBuried], and one that is not there wraps
	// [ErrNotFound].
	Discard(ctx context.Context, id uuid.UUID) error
	// DiscardBuried deletes the buried messages of topic (every topic when
	// empty) buried before before, and returns how many it deleted.
	DiscardBuried(ctx context.Context, topic string, before time.Time) (int64, error)
	// RedactBuried removes fields, keys that [CheckFields] accepts, from
	// the JSON payloads of the buried messages of topic created before
	// before, and returns how many it changed.
	RedactBuried(ctx context.Context, topic string, fields []string, before time.Time) (int64, error)
	// Requeue makes a buried message due at at, with its attempts counted
	// from zero again and its last error kept. A message that is not
	// buried is an error wrapping [ErrNotFound].
	Requeue(ctx context.Context, id uuid.UUID, at time.Time) error
}
