package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/uow"
)

// Topic is the topic of the benchmarks' messages; its handler does nothing
// but count, so the figures measure the outbox and the relay alone.
const Topic = "bench.noop"

// Bench runs benchmarks on one database.
type Bench struct {
	// Runner runs the units of work that fill the database.
	Runner uow.Runner
	// Outbox is the store the relay benchmarks fill and drain.
	Outbox outbox.RelayStore
	// Events is the event store the projection benchmarks append to.
	Events eventstore.Store
	// EventLog is the log the projection benchmarks' runner follows.
	EventLog async.Log
	// Relay configures the relay of the relay benchmarks.
	Relay outbox.RelayConfig
	// Out takes the benchmark's lines, its summary line last.
	Out io.Writer
	// Timed starts the timed part of a benchmark; nil times nothing but
	// the figure.
	Timed Timing
	// Logger takes what goes wrong beside the figure; nil discards it.
	Logger *slog.Logger
	// TracerProvider makes the relay's spans; nil means
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

// Timing starts the timed part of a benchmark, whose progress count tells,
// until the returned function is called. The function may be called more
// than once.
type Timing func(count func() int64) (stop func())

func (b Bench) timed(count func() int64) func() {
	if b.Timed == nil {
		return func() {}
	}
	return b.Timed(count)
}

func (b Bench) log() *slog.Logger {
	if b.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Logger
}

// CutShortError is a benchmark that its context ended (Ctrl-C or a
// timeout) before it was done; its partial summary line is printed.
type CutShortError struct {
	Name     string
	Done, Of int64
	Err      error
}

func (e *CutShortError) Error() string {
	if e.Of == 0 {
		return fmt.Sprintf("%s: cut short after %d: %v", e.Name, e.Done, e.Err)
	}
	return fmt.Sprintf("%s: cut short after %d of %d: %v", e.Name, e.Done, e.Of, e.Err)
}

func (e *CutShortError) Unwrap() error { return e.Err }

// percentile returns the p-th percentile of the sorted lat by nearest rank.
func percentile(lat []time.Duration, p float64) string {
	n := len(lat)
	i := int(math.Ceil(p*float64(n))) - 1
	return ms(lat[min(max(i, 0), n-1)])
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// errStopped is returned by [pacedUntil] when what it waits on stopped
// before every send arrived.
var errStopped = errors.New("stopped")

// pacedUntil sends n at rate with [paced], or with [closedLoop] when load
// says so, then waits until arrived is closed. It returns cut, ctx's error,
// when ctx ended first; and err when a send failed, or, wrapping
// errStopped and its error, when a value came on stopped first (a nil
// stopped never comes).
func pacedUntil(ctx context.Context, load Load, n, rate int, send func(i int) error, arrived <-chan struct{}, stopped <-chan error) (cut, err error) {
	produce := paced
	if load == ClosedLoop {
		produce = closedLoop
	}
	if err := produce(ctx, n, rate, send); err != nil {
		if ctx.Err() == nil {
			return nil, fmt.Errorf("send: %w", err)
		}
		return ctx.Err(), nil
	}
	select {
	case <-arrived:
		return nil, nil
	case err := <-stopped:
		return nil, fmt.Errorf("%w: %v", errStopped, err)
	case <-ctx.Done():
		return ctx.Err(), nil
	}
}

// paced calls send(i) for i from 0 to n-1, rate times a second on a
// schedule that does not wait for earlier calls to return, and returns the
// first error once all have returned. It calls no more once ctx ends, and
// then returns ctx's error.
func paced(ctx context.Context, n, rate int, send func(i int) error) error {
	var senders sync.WaitGroup
	errs := make(chan error, n+1)
	period := time.Second / time.Duration(rate)
	began := time.Now()
	next := time.NewTimer(0)
	defer next.Stop()
	for i := range n {
		next.Reset(time.Until(began.Add(time.Duration(i) * period)))
		select {
		case <-next.C:
		case <-ctx.Done():
		}
		// A tick and the context's end may come together.
		if err := ctx.Err(); err != nil {
			errs <- err
			senders.Wait()
			close(errs)
			return <-errs
		}
		senders.Go(func() {
			if err := send(i); err != nil {
				errs <- err
			}
		})
	}
	senders.Wait()
	close(errs)
	return <-errs
}

// Load is how a benchmark that sends at a rate sends.
type Load int

const (
	// OpenLoop sends on a schedule that does not wait for earlier sends
	// ([paced]): the rate holds whatever the commits take, and a slow
	// commit delays the ones behind it, as it would a service's users.
	OpenLoop Load = iota
	// ClosedLoop sends as riverbench's latency mode does ([closedLoop]),
	// for figures set beside its: one sender that waits for each commit.
	ClosedLoop
)

// closedLoop calls send(i) for i from 0 to n-1 on the ticks of a
// [time.Ticker] of rate a second, each once the one before it has
// returned. A tick that passes while a send runs is dropped, as the
// ticker drops it, so the rate falls when sends are slow, and the time a
// send would have waited behind a slow one is counted nowhere. It calls no
// more once ctx ends, and then returns ctx's error.
func closedLoop(ctx context.Context, n, rate int, send func(i int) error) error {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := range n {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		// A tick and the context's end may come together.
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := send(i); err != nil {
			return err
		}
	}
	return nil
}
