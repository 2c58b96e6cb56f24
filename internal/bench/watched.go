package bench

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
)

// watchedProjection is a projection that notes when each event it applies
// was applied. It keeps the name, version and types of the projection it
// wraps, so it follows the log as that projection's consumer group.
//
// An event is noted once its Apply returns, inside the subscriber's
// transaction; the transaction commits with the rest of its batch.
type watchedProjection struct {
	projections.Projection
	want  int
	first chan struct{} // closed at the first event applied
	all   chan struct{} // closed once want distinct events are applied

	mu      sync.Mutex
	applied map[uuid.UUID]time.Time
}

func watch(p projections.Projection, want int) *watchedProjection {
	return &watchedProjection{
		Projection: p,
		want:       want,
		first:      make(chan struct{}),
		all:        make(chan struct{}),
		applied:    make(map[uuid.UUID]time.Time, want),
	}
}

// Apply applies events through the wrapped projection and notes the time
// of each that is new to it: an event applied again, after an attempt that
// did not commit, keeps its first time and is counted once.
func (w *watchedProjection) Apply(ctx context.Context, tx uow.Tx, events ...eventstore.Event) error {
	if err := w.Projection.Apply(ctx, tx, events...); err != nil {
		return err
	}
	at := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	before := len(w.applied)
	for _, e := range events {
		if _, ok := w.applied[e.ID]; !ok {
			w.applied[e.ID] = at
		}
	}
	if before == 0 && len(w.applied) > 0 {
		close(w.first)
	}
	if before < w.want && len(w.applied) >= w.want {
		close(w.all)
	}
	return nil
}

// count returns how many distinct events were applied.
func (w *watchedProjection) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.applied)
}

// appliedAt returns when the event id was first applied.
func (w *watchedProjection) appliedAt(id uuid.UUID) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.applied[id]
	return at, ok
}
