// Package projections keeps read models from events. An inline projection
// is written in the same unit of work as the events it follows; every
// projection can be rebuilt from the event log alone, which is also the
// proof that it holds nothing the events do not.
package projections

import (
	"context"
	"fmt"
	"strconv"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// Projection is a read model kept from events: inline, in the unit of work
// of the command whose events it follows, or asynchronously, by a
// [Runner] that follows the event log.
type Projection interface {
	// Name names the read model.
	Name() string
	// Version numbers the read model's shape. An asynchronous projection's
	// consumer group is its name and version ([Group]), so a new version
	// follows the log from its start, beside the old one.
	Version() int
	// Types lists the event types the projection applies, or none for
	// every type; a [Runner] hands it no other.
	Types() []string
	// Reset empties the projection as part of tx, before a rebuild.
	Reset(ctx context.Context, tx uow.Tx) error
	// Apply updates the projection with events, in log order, as part of tx.
	Apply(ctx context.Context, tx uow.Tx, events ...eventstore.Event) error
}

// Group returns the consumer group of an asynchronous projection: its name
// and version, such as "activity.v2".
func Group(p Projection) string { return p.Name() + ".v" + strconv.Itoa(p.Version()) }

// pageSize is how many events a rebuild reads at a time.
const pageSize = 1000

// Rebuild empties p and replays the whole event log into it in one unit of
// work, so readers see the old projection until the new one commits. It
// returns how many events it replayed.
//
// Reset is expected to lock the projection, so that a command that would
// write to it waits for the rebuild and then applies its own events. The log
// is then read as committed ([eventstore.Store.ReadCommitted]), which does
// not wait, as ReadAll would, for the oldest transaction in flight anywhere
// on the server.
func Rebuild(ctx context.Context, runner uow.Runner, events eventstore.Store, p Projection) (int, error) {
	var n int
	err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		n = 0
		if err := p.Reset(ctx, tx); err != nil {
			return err
		}
		var after eventstore.Position
		for {
			page, err := events.ReadCommitted(ctx, tx, after, pageSize)
			if err != nil {
				return err
			}
			if len(page) == 0 {
				return nil
			}
			if err := p.Apply(ctx, tx, page...); err != nil {
				return err
			}
			n += len(page)
			after = page[len(page)-1].Position
		}
	})
	if err != nil {
		return 0, fmt.Errorf("projections: rebuild: %w", err)
	}
	return n, nil
}
