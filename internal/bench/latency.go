package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/uow"
)

// Latency commits rate messages a second for d, each in its own
// transaction, on a schedule that does not wait for the relay, and
// measures for each the time from the moment its transaction asked to
// commit to the moment its handler ran, in a relay with [Bench.Relay].
// Load says whether the schedule waits for the commits; with [ClosedLoop]
// fewer than rate a second may be sent, which the line before the summary
// tells.
//
// A second at the same rate comes first and is not counted, as a service
// that has been running: its pools then hold the connections the rate
// needs. Started cold, each send that finds no idle connection dials one
// (pgxpool waits for its dial even when another connection is released
// meanwhile), and the first half second of a run at 1,000/s measured
// those dials and the new server processes' first statements: a p99 of
// up to 240 ms against 3–15 ms after it.
func (b Bench) Latency(ctx context.Context, rate int, d time.Duration, load Load) error {
	n := int(d.Seconds() * float64(rate))
	n = max(n, 1)
	sent := make([]time.Time, n)
	// committed is when each transaction's commit returned: the latency
	// splits there into the database's commit and the relay's part.
	committed := make([]time.Time, n)
	received := make([]time.Time, n)
	var seen atomic.Int64
	// The warm-up's messages have the sequence numbers -1 to -warmUp.
	warmUp := rate
	var warmed atomic.Int64
	done, warm := make(chan struct{}), make(chan struct{})
	relay, err := relay.New(b.Outbox, map[string]outbox.Handler{
		Topic: func(_ context.Context, m outbox.Message) error {
			at := time.Now()
			var body struct{ Seq int }
			if err := json.Unmarshal(m.Payload, &body); err != nil {
				return err
			}
			if body.Seq < 0 {
				if m.Attempts == 1 && warmed.Add(1) == int64(warmUp) {
					close(warm)
				}
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
	}, b.Relay, relay.WithTracerProvider(b.TracerProvider))
	if err != nil {
		return err
	}
	stop, ran := start(ctx, relay)
	defer stop()

	send := func(seq int) error {
		err := b.Runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
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
		if err == nil && seq >= 0 {
			committed[seq] = time.Now()
		}
		return err
	}
	// A second at the rate first, so that the pools hold the connections
	// the rate needs and the relay is listening before timing starts.
	if cut, err := pacedUntil(ctx, load, warmUp, rate, func(i int) error { return send(-1 - i) }, warm, nil); err != nil || cut != nil {
		return fmt.Errorf("bench latency: warm-up: %w", cmp.Or(err, cut))
	}

	stopProfile := b.timed(seen.Load)
	defer stopProfile()
	cut, err := pacedUntil(ctx, load, n, rate, send, done, nil)
	if err != nil {
		return fmt.Errorf("bench latency: %w", err)
	}
	stop()
	if err := <-ran; err != nil && cut == nil {
		return err
	}
	stopProfile()
	// The relay has stopped: what its handlers wrote is all there is.
	var lat, commit, relayed []time.Duration
	for i := range n {
		if !sent[i].IsZero() && !received[i].IsZero() {
			lat = append(lat, received[i].Sub(sent[i]))
			if !committed[i].IsZero() {
				// The relay may run the handler before the committing
				// goroutine reads the clock.
				c := committed[i]
				if received[i].Before(c) {
					c = received[i]
				}
				commit = append(commit, c.Sub(sent[i]))
				relayed = append(relayed, received[i].Sub(c))
			}
		}
	}
	if len(lat) == 0 {
		if cut != nil {
			fmt.Fprintf(b.Out, "latency: rate=%d/s n=0 (cut short: 0 of %d)\n", rate, n)
			return &CutShortError{Name: "bench latency", Of: int64(n), Err: cut}
		}
		return errors.New("bench latency: nothing was delivered")
	}
	// The rate sent and the split go first: the summary line is the last.
	if first, last := sent[0], sent[n-1]; n > 1 && !first.IsZero() && !last.IsZero() && last.After(first) {
		took := last.Sub(first)
		fmt.Fprintf(b.Out, "latency: sent %d in %.2fs, %.0f/s\n", n, took.Seconds(), float64(n-1)/took.Seconds())
	}
	if len(commit) > 0 {
		slices.Sort(commit)
		slices.Sort(relayed)
		fmt.Fprintf(b.Out, "latency: of which the commit p50=%s p99=%s, then the relay p50=%s p99=%s\n",
			percentile(commit, 0.50), percentile(commit, 0.99), percentile(relayed, 0.50), percentile(relayed, 0.99))
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
