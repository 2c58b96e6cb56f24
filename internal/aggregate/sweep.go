package aggregate

import (
	"context"
	"time"

	"github.com/eventsourced/accounts/internal/uow"
)

// The bounds of the domains' sweeps, which delete what has expired.
const (
	// SweepMargin is how long after its expiry a sweep deletes something:
	// an instance whose clock runs ahead of the others' must not sweep
	// what they still take as live.
	SweepMargin = 5 * time.Minute
	// SweepBatch bounds the rows, or keys, that one unit of work of a
	// sweep deletes ([Commands.InBatches]).
	SweepBatch = 1000
)

// InBatches runs batch, a unit of work of the command name that deletes
// or forgets up to [SweepBatch] of something, again and again until it
// deletes nothing, and returns how many it deleted in all. A sweep goes
// so through a long backlog without holding SQLite's writer, or
// PostgreSQL's locks, for long. A batch that fails rolled back: what the
// batches before it deleted stays deleted and is counted.
func (c *Commands) InBatches(ctx context.Context, name string, batch func(ctx context.Context, tx uow.Tx) (int64, error)) (int64, error) {
	var total int64
	for {
		var n int64
		err := c.Do(ctx, name, func(ctx context.Context, tx uow.Tx) error {
			var err error
			n, err = batch(ctx, tx)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n == 0 {
			return total, nil
		}
	}
}
