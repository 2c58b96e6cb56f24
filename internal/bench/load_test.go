package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// An open-loop load sends on its schedule while earlier sends still run; a
// closed-loop one sends one at a time, in order, and stops when its
// context ends.
func TestLoads(t *testing.T) {
	t.Parallel()
	t.Run("OpenLoopDoesNotWaitForSends", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		secondStarted := make(chan struct{})
		var waited atomic.Bool
		err := paced(ctx, 2, 1000, func(i int) error {
			if i == 1 {
				close(secondStarted)
				return nil
			}
			select {
			case <-secondStarted:
				waited.Store(true)
			case <-ctx.Done():
			}
			return nil
		})
		if err != nil || !waited.Load() {
			t.Errorf("paced: %v; the first send saw the second start: %v, want true", err, waited.Load())
		}
	})
	t.Run("ClosedLoopSendsOneAtATime", func(t *testing.T) {
		t.Parallel()
		var running, most, next atomic.Int64
		var outOfOrder atomic.Bool
		err := closedLoop(t.Context(), 50, 10000, func(i int) error {
			if n := running.Add(1); n > most.Load() {
				most.Store(n)
			}
			defer running.Add(-1)
			if int64(i) != next.Add(1)-1 {
				outOfOrder.Store(true)
			}
			return nil
		})
		if err != nil || most.Load() != 1 || next.Load() != 50 || outOfOrder.Load() {
			t.Errorf("closedLoop: %v, %d sends at most at once, %d sends, out of order %v; want 1 at a time, 50 in order",
				err, most.Load(), next.Load(), outOfOrder.Load())
		}
	})
	t.Run("NeitherSendsOnceItsContextHasEnded", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for name, load := range map[string]func(context.Context, int, int, func(int) error) error{"paced": paced, "closedLoop": closedLoop} {
			var sends atomic.Int64
			err := load(ctx, 5, 10000, func(int) error { sends.Add(1); return nil })
			if !errors.Is(err, context.Canceled) || sends.Load() != 0 {
				t.Errorf("%s with an ended context: %v after %d sends, want context.Canceled after none", name, err, sends.Load())
			}
		}
	})
	t.Run("ClosedLoopStopsWithItsContext", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		var sends atomic.Int64
		err := closedLoop(ctx, 50, 10000, func(i int) error {
			if sends.Add(1) == 3 {
				cancel()
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) || sends.Load() != 3 {
			t.Errorf("closedLoop cancelled at the third send: %v after %d sends, want context.Canceled after 3", err, sends.Load())
		}
	})
}
