package aggregate

import (
	"context"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// LoadTail returns the events of stream from the first one recorded at or
// after since, and the stream's version, for an aggregate whose decisions
// depend only on its recent events while its stream grows without bound:
// an append at [eventstore.Exactly] that version still checks the whole
// stream.
//
// An event's time comes from the clock of the unit of work that wrote it,
// so a later event can carry an earlier time than the one before it
// ([eventstore.Store.LoadSince]) and be left out while that one is in: a
// fact that undoes an earlier one would then be missed. So when the
// recent events are not the whole stream from the first of them, the
// rest is loaded too.
func LoadTail(ctx context.Context, store eventstore.Store, tx uow.Tx, stream string, since time.Time) ([]eventstore.Event, int64, error) {
	events, version, err := store.LoadSince(ctx, tx, stream, since)
	if err != nil || len(events) == 0 {
		return events, version, err
	}
	first := events[0].Version
	if int64(len(events)) == version-first+1 {
		return events, version, nil
	}
	all, err := store.Load(ctx, tx, stream, first)
	if err != nil {
		return nil, 0, err
	}
	// Events appended since LoadSince read the version fail the append.
	for len(all) > 0 && all[len(all)-1].Version > version {
		all = all[:len(all)-1]
	}
	return all, version, nil
}
