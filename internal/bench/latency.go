package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
)

// Latency commits rate messages a second for d, each in its own
// transaction, on a schedule that does not wait for the relay, and
// measures for each the time from the moment its transaction asked to
// commit to the moment its handler ran, in a relay with [Bench.Relay].
func (b Bench) Latency(ctx context.Context, rate int, d time.Duration) error {
	n := int(d.Seconds() * float64(rate))
	n = max(n, 1)
	sent := make([]time.Time, n)
	received := make([]time.Time, n)
	var seen atomic.Int64
	done, warm := make(chan struct{}), make(chan struct{})
	var warmOnce sync.Once
	relay, err := outbox.NewRelay(b.Outbox, map[string]outbox.Handler{
		Topic: func(_ context.Context, m outbox.Message) error {
			at := time.Now()
			var body struct{ Seq int }
			if err := json.Unmarshal(m.Payload, &body); err != nil {
				return err
			}
			if body.Seq < 0 {
				warmOnce.Do(func() { close(warm) })
				return nil
			}
			if m.Attempts == 1 {
				received[body.Seq] = at
				if seen.Add(1) == int64(n) {
					close(done)
				}
			}
			return nil
		},
	}, b.Relay)
	if err != nil {
		return err
	}
	stop, ran := start(ctx, relay)
	defer stop()

	send := func(seq int) error {
		return b.Runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			m, err := outbox.NewMessage(Topic, map[string]int{"seq": seq}, tx.Now())
			if err != nil {
				return err
			}
			if err := b.Outbox.Add(ctx, tx, m); err != nil {
				return err
			}
			if seq >= 0 {
				sent[seq] = time.Now()
			}
			return nil
		})
	}
	// One message first, so the relay is listening before timing starts.
	if err := send(-1); err != nil {
		return err
	}
	select {
	case <-warm:
	case <-ctx.Done():
		return fmt.Errorf("bench latency: warm-up: %w", ctx.Err())
	}

	stopProfile := b.timed(seen.Load)
	defer stopProfile()
	cut, err := pacedUntil(ctx, n, rate, send, done, nil)
	if err != nil {
		return fmt.Errorf("bench latency: %w", err)
	}
	stop()
	if err := <-ran; err != nil && cut == nil {
		return err
	}
	stopProfile()
	// The relay has stopped: what its handlers wrote is all there is.
	var lat []time.Duration
	for i := range n {
		if !sent[i].IsZero() && !received[i].IsZero() {
			lat = append(lat, received[i].Sub(sent[i]))
		}
	}
	if len(lat) == 0 {
		if cut != nil {
			fmt.Fprintf(b.Out, "latency: rate=%d/s n=0 (cut short: 0 of %d)\n", rate, n)
			return &CutShortError{Name: "bench latency", Of: int64(n), Err: cut}
		}
		return errors.New("bench latency: nothing was delivered")
	}
	slices.Sort(lat)
	line := fmt.Sprintf("latency: rate=%d/s n=%d p50=%s p90=%s p99=%s max=%s",
		rate, len(lat), percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99), ms(lat[len(lat)-1]))
	if cut != nil {
		fmt.Fprintf(b.Out, "%s (cut short: %d of %d)\n", line, len(lat), n)
		return &CutShortError{Name: "bench latency", Done: int64(len(lat)), Of: int64(n), Err: cut}
	}
	fmt.Fprintln(b.Out, line)
	return nil
}
