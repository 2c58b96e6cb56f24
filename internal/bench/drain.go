package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/uow"
)

// Drain fills the outbox with n messages, then times a relay with
// [Bench.Relay] until its handler has seen all of them, and checks that all were
// acknowledged.
func (b Bench) Drain(ctx context.Context, n int) error {
	elapsed, err := b.drain(ctx, n)
	if cut := (*CutShortError)(nil); errors.As(err, &cut) {
		fmt.Fprintf(b.Out, "drain: %d messages in %.2fs, %.0f msgs/s (cut short: %d of %d)\n",
			cut.Done, elapsed.Seconds(), float64(cut.Done)/elapsed.Seconds(), cut.Done, n)
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(b.Out, "drain: %d messages in %.2fs, %.0f msgs/s\n", n, elapsed.Seconds(), float64(n)/elapsed.Seconds())
	return nil
}

// drain is [Bench.Drain] without its line: it returns how long the relay
// took, or, cut short, a [*CutShortError] and the time until then.
func (b Bench) drain(ctx context.Context, n int) (time.Duration, error) {
	const perTx = 1000
	for start := 0; start < n; start += perTx {
		err := b.Runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			msgs := make([]outbox.Message, 0, perTx)
			for i := start; i < min(start+perTx, n); i++ {
				m, err := outbox.NewMessage(Topic, map[string]int{"seq": i}, tx.Now())
				if err != nil {
					return err
				}
				msgs = append(msgs, m)
			}
			return b.Outbox.Add(ctx, tx, msgs...)
		})
		if err != nil {
			return 0, fmt.Errorf("bench drain: fill: %w", err)
		}
	}
	var seen atomic.Int64
	done := make(chan struct{})
	relay, err := relay.New(b.Outbox, map[string]outbox.Handler{
		Topic: func(context.Context, outbox.Message) error {
			if seen.Add(1) == int64(n) {
				close(done)
			}
			return nil
		},
	}, b.Relay, relay.WithTracerProvider(b.TracerProvider))
	if err != nil {
		return 0, err
	}
	return b.runUntilDone(ctx, "bench drain", relay, done, &seen, n)
}

// runUntilDone runs relay until done is closed, timing it, then stops it
// and checks that it left none of the n messages unacknowledged and that
// seen, its handlers' count of deliveries, reached n.
//
// When ctx ends first, it returns the time until then and a
// [*CutShortError].
func (b Bench) runUntilDone(ctx context.Context, name string, relay *relay.Relay, done <-chan struct{}, seen *atomic.Int64, n int) (time.Duration, error) {
	stopProfile := b.timed(seen.Load)
	began := time.Now()
	stop, ran := start(ctx, relay)
	defer stop()
	select {
	case <-done:
		stopProfile()
	case err := <-ran:
		return 0, fmt.Errorf("%s: relay stopped after %d of %d messages: %v", name, seen.Load(), n, err)
	case <-ctx.Done():
		stopProfile()
		elapsed := time.Since(began)
		stop()
		<-ran
		return elapsed, &CutShortError{Name: name, Done: seen.Load(), Of: int64(n), Err: ctx.Err()}
	}
	elapsed := time.Since(began)
	stop()
	if err := <-ran; err != nil {
		return 0, err
	}
	left, err := b.Outbox.Claim(ctx, time.Now().Add(24*time.Hour), time.Minute, n)
	if err != nil {
		return 0, err
	}
	if len(left) > 0 || seen.Load() != int64(n) {
		return 0, fmt.Errorf("%s: handlers saw %d deliveries of %d messages, %d left unacknowledged", name, seen.Load(), n, len(left))
	}
	return elapsed, nil
}

// start runs relay until stop is called, and reports Run's error on ran.
func start(ctx context.Context, relay *relay.Relay) (stop context.CancelFunc, ran <-chan error) {
	ctx, stop = context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- relay.Run(ctx) }()
	return stop, errc
}
