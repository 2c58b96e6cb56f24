package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// Projection is a read model kept from events: inline, in the unit of work
// of the command whose events it follows, or asynchronously, by the
// runner of package async, which follows the event log.
type Projection interface {
	// Name names the read model.
	Name() string
	// Version numbers the read model's shape. An asynchronous projection's
	// consumer group is its name and version ([Group]), so a new version
	// follows the log from its start, beside the old one.
	Version() int
	// Types lists the event types the projection applies, or none for
	// every type; the runner of asynchronous ones hands it no other.
	Types() []string
	// Reset empties the projection as part of tx, before a rebuild.
	Reset(ctx context.Context, tx uow.Tx) error
	// Apply updates the projection with events, in log order, as part of tx.
	// An asynchronous projection must leave an event it has applied already
	// as it is (keyed by its position, say): when a subscriber stops
	// waiting for a batch (its ack deadline passed) and commits while the
	// handler is still writing, what the handler wrote may commit without
	// the offset, and the batch comes again.
	Apply(ctx context.Context, tx uow.Tx, events ...eventstore.Event) error
}

// Rebuildable is an asynchronous projection that can be built again, as a
// new version beside the one that serves reads, and switched to while the
// service serves (async.Renew). Its versions are numbered from its Version;
// which one serves, and which is being built, is kept in the backend's
// registry ([Log.Catalog]), so that every instance follows the same ones.
type Rebuildable interface {
	Projection
	// At returns the projection writing version v's tables.
	At(v int) Rebuildable
	// Create makes the projection's tables, unless they exist, in tx.
	Create(ctx context.Context, tx uow.Tx) error
	// Serve makes the projection's reads see its tables from the commit
	// of tx on. A read in flight finishes on the tables it began on.
	Serve(ctx context.Context, tx uow.Tx) error
	// Drop removes the projection's tables in tx, waiting for reads of
	// them in flight.
	Drop(ctx context.Context, tx uow.Tx) error
}

// Versions is where a [Rebuildable] projection stands in the registry.
type Versions struct {
	// Serving is the version reads see.
	Serving int
	// Building is the version being built beside it, 0 when none.
	Building int
}

// Group returns the consumer group of an asynchronous projection: its name
// and version, such as "activity.v2".
func Group(p Projection) string { return groupOf(p.Name(), p.Version()) }

func groupOf(name string, version int) string { return name + ".v" + strconv.Itoa(version) }

// ServingBehind counts the events of p's types that the version of p
// serving reads (by log's registry, p's own version when it holds none)
// has still to apply. A log out of order ([ErrLogOrder]) gives its honest
// count and no error: a reader is told how far behind the projection is,
// and the status and metrics of the runner say why.
func ServingBehind(ctx context.Context, log Log, p Projection) (int64, error) {
	v, err := log.Versions(ctx, p.Name(), p.Version())
	if err != nil {
		return 0, err
	}
	n, _, err := log.Behind(ctx, groupOf(p.Name(), v.Serving), p.Types())
	if errors.Is(err, ErrLogOrder) {
		return n, nil
	}
	return n, err
}

// pageSize is how many events a rebuild reads at a time.
const pageSize = 1000

// Rebuild empties p and replays the whole event log into it in one unit of
// work, so readers see the old projection until the new one commits. It
// hands p only events of its types, as a [Runner] does, and returns how
// many events of the log it read.
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
			after = page[len(page)-1].Position
			n += len(page)
			if types := p.Types(); len(types) > 0 {
				page = slices.DeleteFunc(page, func(e eventstore.Event) bool { return !slices.Contains(types, e.Type) })
			}
			if err := p.Apply(ctx, tx, page...); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return 0, fmt.Errorf("projections: rebuild: %w", err)
	}
	return n, nil
}
