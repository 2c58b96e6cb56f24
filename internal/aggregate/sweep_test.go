package aggregate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/eventsourced/accounts/internal/aggregate"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// InBatches runs batches until one deletes nothing and counts them all;
// a batch that fails ends it, with what the batches before it deleted.
func TestInBatches(t *testing.T) {
	db := pgtest.New(t)
	cmds, err := aggregate.NewCommands(aggregate.CommandsConfig{Domain: "sweeper", Instrumentation: "example/sweeper", Runner: db.Runner(nil)})
	if err != nil {
		t.Fatal(err)
	}
	errDisk := errors.New("sweeper: disk full")
	for _, c := range []struct {
		name      string
		backlog   int64
		failAt    int // the batch that fails, from 1; 0 for none
		wantTotal int64
		wantRuns  int
		wantErr   error
	}{
		{"nothing to delete", 0, 0, 0, 1, nil},
		{"less than a batch", 3, 0, 3, 2, nil},
		{"a backlog of batches", 2*aggregate.SweepBatch + 3, 0, 2*aggregate.SweepBatch + 3, 4, nil},
		{"a batch fails", 3 * aggregate.SweepBatch, 3, 2 * aggregate.SweepBatch, 3, errDisk},
	} {
		t.Run(c.name, func(t *testing.T) {
			backlog, runs := c.backlog, 0
			total, err := cmds.InBatches(t.Context(), "sweeper.Sweep", func(ctx context.Context, tx uow.Tx) (int64, error) {
				runs++
				if runs == c.failAt {
					return 0, errDisk
				}
				n := min(backlog, aggregate.SweepBatch)
				backlog -= n
				return n, nil
			})
			if total != c.wantTotal || runs != c.wantRuns || !errors.Is(err, c.wantErr) {
				t.Errorf("InBatches = %d after %d batches, %v; want %d after %d, %v", total, runs, err, c.wantTotal, c.wantRuns, c.wantErr)
			}
		})
	}
}
