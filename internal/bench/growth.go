package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// GrowthDB is a database of the growth benchmark, with the parts it
// measures there.
type GrowthDB struct {
	// Stores holds the Runner, Outbox, Events and EventLog of the
	// database; the rest of the Bench is the caller's.
	Stores   Bench
	Keys     *keyring.Keyring
	Activity user.ActivityProjection
	Views    user.ViewsProjection
	// API returns the HTTP API over the database, for a round of
	// sign-ins ([Bench.SignIn]).
	API func() (*http.Server, error)
	// Load writes events as they are, numbered and timed, as part of tx
	// (postgres.LoadEvents, sqlite.LoadEvents).
	Load func(ctx context.Context, tx uow.Tx, events []eventstore.Event) error
	// Writers is how many units of work load at once.
	Writers int
	// Size returns the bytes that the events table and its indexes take,
	// and how many events it holds.
	Size func(ctx context.Context) (bytes, events int64, err error)
	// Settle runs after a load and before the figures: statistics for the
	// planner, a checkpoint. Nil runs nothing.
	Settle func(ctx context.Context) error
}

// GrowthConfig sizes the growth benchmark.
type GrowthConfig struct {
	// Events is the history the grown database holds.
	Events int
	// Concurrency and SignIn are the requests in flight and the length of
	// a round of sign-ins.
	Concurrency int
	SignIn      time.Duration
	// Messages are drained; CatchUp events are appended for the activity
	// to catch up on; Samples streams of each kind are loaded.
	Messages, CatchUp, Samples int
}

// growthFigures are what one database measured.
type growthFigures struct {
	signIn                  float64 // requests/s
	signInP99               time.Duration
	userTail, signInTail    time.Duration // p99 of the domain's load
	userWhole               time.Duration // p99 of loading a whole user stream
	drain                   float64       // messages/s
	catchUp                 float64       // events/s
	rebuild, viewsRebuild   float64       // events/s
	rebuildN, viewsRebuildN int64
}

// Growth measures how the service holds up as its event log grows: on an
// empty database and on one that holds a history of cfg.Events events
// (history.go), loaded in bulk, it measures sign-in requests per second
// ([Bench.SignIn]), the p99 of the domain's load of a user stream and of
// a sign-in stream, and of a whole user stream, the drain ([Bench.Drain]),
// the blue/green rebuild of the activity and the rebuild of the views over
// the whole log, and the activity's catch-up on cfg.CatchUp new events.
// open opens each database, empty, and drop removes it; the empty one is
// measured and dropped before the grown one is opened.
//
// It prints a table, then one line:
//
//	growth: events=N signin=R.RRx drain=R.RRx rebuild=N ev/s bytes/event=N
//
// the ratios grown against empty, rebuild the activity's rebuild of the
// grown log, and bytes/event the events table with its indexes, after the
// load, divided by its events.
func (b Bench) Growth(ctx context.Context, cfg GrowthConfig, open func(ctx context.Context) (GrowthDB, func(context.Context) error, error)) error {
	if cfg.Events < 1 || cfg.Concurrency < 1 || cfg.SignIn <= 0 || cfg.Messages < 1 || cfg.CatchUp < 1 || cfg.Samples < 1 {
		return errors.New("bench growth: --events, --concurrency, --duration, --messages, --catch-up and --samples must be positive")
	}
	phase := func(grown bool) (f growthFigures, bytes, events int64, err error) {
		db, drop, err := open(ctx)
		if err != nil {
			return f, 0, 0, err
		}
		defer func() {
			if derr := drop(context.WithoutCancel(ctx)); derr != nil {
				err = errors.Join(err, fmt.Errorf("bench growth: drop: %w", derr))
			}
		}()
		var samples *history
		if grown {
			began := time.Now()
			h, err := b.preload(ctx, db, newHistory(1, "g", cfg.Events, time.Now()))
			if err != nil {
				return f, 0, 0, err
			}
			elapsed := time.Since(began)
			fmt.Fprintf(b.Out, "growth: loaded %d events in %.1fs, %.0f events/s\n", cfg.Events, elapsed.Seconds(), float64(cfg.Events)/elapsed.Seconds())
			samples = h
		}
		if db.Settle != nil {
			if err := db.Settle(ctx); err != nil {
				return f, 0, 0, err
			}
		}
		if bytes, events, err = db.Size(ctx); err != nil {
			return f, 0, 0, err
		}
		stop := func() {}
		if grown {
			stop = b.timed(func() int64 { return 0 })
		}
		f, err = b.growthFigures(ctx, db, cfg, samples)
		stop()
		return f, bytes, events, err
	}
	empty, _, _, err := phase(false)
	if err != nil {
		return err
	}
	grown, bytes, events, err := phase(true)
	if err != nil {
		return err
	}
	if events < int64(cfg.Events) {
		return fmt.Errorf("bench growth: the grown database holds %d events, not %d", events, cfg.Events)
	}
	perEvent := bytes / events
	w := tabwriter.NewWriter(b.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "figure\tempty\tgrown\tgrown/empty\t\n")
	row := func(name, e, g string, ratio float64) {
		r := "-"
		if ratio > 0 {
			r = fmt.Sprintf("%.2fx", ratio)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", name, e, g, r)
	}
	perSec := func(v float64) string { return fmt.Sprintf("%.0f/s", v) }
	dur := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
	ratio := func(g, e float64) float64 {
		if e == 0 {
			return 0
		}
		return g / e
	}
	row("sign-in requests", perSec(empty.signIn), perSec(grown.signIn), ratio(grown.signIn, empty.signIn))
	row("sign-in p99", dur(empty.signInP99), dur(grown.signInP99), ratio(float64(grown.signInP99), float64(empty.signInP99)))
	row("load user stream p99", dur(empty.userTail), dur(grown.userTail), ratio(float64(grown.userTail), float64(empty.userTail)))
	row("load sign-in stream p99", dur(empty.signInTail), dur(grown.signInTail), ratio(float64(grown.signInTail), float64(empty.signInTail)))
	row("load whole user stream p99", dur(empty.userWhole), dur(grown.userWhole), ratio(float64(grown.userWhole), float64(empty.userWhole)))
	row("drain messages", perSec(empty.drain), perSec(grown.drain), ratio(grown.drain, empty.drain))
	row("activity catch-up events", perSec(empty.catchUp), perSec(grown.catchUp), ratio(grown.catchUp, empty.catchUp))
	of := func(v float64, n int64) string { return fmt.Sprintf("%.0f/s of %d", v, n) }
	row("activity rebuild events", of(empty.rebuild, empty.rebuildN), of(grown.rebuild, grown.rebuildN), 0)
	row("views rebuild events", of(empty.viewsRebuild, empty.viewsRebuildN), of(grown.viewsRebuild, grown.viewsRebuildN), 0)
	row("events table and indexes", "", fmt.Sprintf("%d MB", bytes>>20), 0)
	if err := w.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(b.Out, "growth: events=%d signin=%.2fx drain=%.2fx rebuild=%.0f ev/s bytes/event=%d\n",
		cfg.Events, ratio(grown.signIn, empty.signIn), ratio(grown.drain, empty.drain), grown.rebuild, perEvent)
	return err
}

// loadPerTx is how many events of the history a unit of work loads. The
// service's own units of work append one to three events; the log's
// readers find the events of one transaction by its ID and then by
// position, so a load in transactions of thousands would give them a log
// that no service writes, whose reads cost otherwise (a range that ends
// inside a transaction reads the rest of it). Twenty keeps the load fast
// and the transactions near the service's.
const loadPerTx = 20

// preload writes the history h into db in units of work of loadPerTx
// events, db.Writers at once, and returns h, which keeps a sample of its
// streams.
func (b Bench) preload(ctx context.Context, db GrowthDB, h *history) (*history, error) {
	const batch = 5000
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []spec, max(db.Writers, 1))
	errs := make(chan error, max(db.Writers, 1))
	var written atomic.Int64
	var wg sync.WaitGroup
	for range max(db.Writers, 1) {
		wg.Go(func() {
			for specs := range batches {
				for first := 0; first < len(specs); first += loadPerTx {
					err := db.Stores.Runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
						ctx = keyring.Within(ctx, tx)
						unit := specs[first:min(first+loadPerTx, len(specs))]
						events := make([]eventstore.Event, len(unit))
						for i, s := range unit {
							e, err := s.event(ctx, tx, db.Keys)
							if err != nil {
								return err
							}
							events[i] = e
						}
						return db.Load(ctx, tx, events)
					})
					if err != nil {
						errs <- fmt.Errorf("bench growth: load: %w", err)
						cancel()
						return
					}
				}
				if n := written.Add(int64(len(specs))); n/1_000_000 != (n-int64(len(specs)))/1_000_000 {
					b.log().Info("bench growth: loading", "events", n, "of", h.want)
				}
			}
		})
	}
	var err error
	for err == nil {
		specs := h.next(batch)
		if len(specs) == 0 {
			break
		}
		select {
		case batches <- specs:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	close(batches)
	wg.Wait()
	close(errs)
	if werr := <-errs; werr != nil {
		return nil, werr
	}
	return h, err
}

// growthFigures measures db: the drain first, on an empty outbox; then a
// round of sign-ins; the rebuilds, which leave the activity at the head
// of the log; the catch-up on cfg.CatchUp new events; and the loads, of
// streams of h, or, on the empty database, of the catch-up's.
func (b Bench) growthFigures(ctx context.Context, db GrowthDB, cfg GrowthConfig, h *history) (growthFigures, error) {
	var f growthFigures
	m := b
	m.Runner, m.Outbox, m.Events, m.EventLog = db.Stores.Runner, db.Stores.Outbox, db.Stores.Events, db.Stores.EventLog
	m.Timed, m.Out = nil, nil

	elapsed, err := m.drain(ctx, cfg.Messages)
	if err != nil {
		return f, fmt.Errorf("bench growth: %w", err)
	}
	f.drain = float64(cfg.Messages) / elapsed.Seconds()

	api, err := db.API()
	if err != nil {
		return f, err
	}
	r := m.serveSignIns(ctx, api, cfg.Concurrency, cfg.SignIn)
	if r.err == nil && r.cut != nil {
		r.err = r.cut
	}
	if r.err != nil {
		return f, fmt.Errorf("bench growth: sign-ins: %w", r.err)
	}
	f.signIn = float64(len(r.lat)) / r.elapsed.Seconds()
	slices.Sort(r.lat)
	f.signInP99 = r.lat[min(len(r.lat)-1, len(r.lat)*99/100)]

	if f.rebuild, f.rebuildN, err = m.rebuildActivity(ctx, db); err != nil {
		return f, err
	}
	began := time.Now()
	n, err := projections.Rebuild(ctx, db.Stores.Runner, db.Stores.Events, db.Views)
	if err != nil {
		return f, fmt.Errorf("bench growth: %w", err)
	}
	f.viewsRebuild, f.viewsRebuildN = float64(n)/time.Since(began).Seconds(), int64(n)

	catchUp, err := m.preload(ctx, db, newHistory(2, "c", cfg.CatchUp, time.Now()))
	if err != nil {
		return f, err
	}
	if f.catchUp, err = m.catchUp(ctx, db, cfg.CatchUp); err != nil {
		return f, err
	}
	if h == nil {
		h = catchUp
	}
	window := user.Policy{}.WithDefaults()
	since := max(window.LinkWindow, window.LinkTTL)
	if f.userTail, err = m.loads(ctx, h.users, cfg.Samples, func(ctx context.Context, tx uow.Tx, s string) error {
		_, _, err := m.Events.LoadSince(ctx, tx, s, tx.Now().Add(-since))
		return err
	}); err != nil {
		return f, err
	}
	if f.signInTail, err = m.loads(ctx, h.signIns, cfg.Samples, func(ctx context.Context, tx uow.Tx, s string) error {
		_, _, err := m.Events.LoadSince(ctx, tx, s, tx.Now().Add(-since))
		return err
	}); err != nil {
		return f, err
	}
	if f.userWhole, err = m.loads(ctx, h.users, cfg.Samples, func(ctx context.Context, tx uow.Tx, s string) error {
		_, err := m.Events.Load(ctx, tx, s, 0)
		return err
	}); err != nil {
		return f, err
	}
	return f, nil
}

// rebuildActivity rebuilds the activity blue/green over the whole log
// ([async.Renew]) and returns the events of the log it passed per
// second, and how many.
func (b Bench) rebuildActivity(ctx context.Context, db GrowthDB) (float64, int64, error) {
	_, events, err := db.Size(ctx)
	if err != nil {
		return 0, 0, err
	}
	began := time.Now()
	if _, _, err := async.Renew(ctx, b.EventLog, db.Activity, nil, async.WithRunnerLogger(b.log())); err != nil {
		return 0, 0, fmt.Errorf("bench growth: %w", err)
	}
	return float64(events) / time.Since(began).Seconds(), events, nil
}

// catchUp runs the activity, at the version that serves, until it has
// applied the n events appended since it was last at the head of the log,
// and returns the events per second.
func (b Bench) catchUp(ctx context.Context, db GrowthDB, n int) (float64, error) {
	began := time.Now()
	stop, ran, err := b.runProjection(ctx, db.Activity)
	if err != nil {
		return 0, err
	}
	defer stop()
	// The count of what is behind reads what is left of the log: it waits
	// nine times as long as the last took, so that the counts take a tenth
	// of a database connection's time, not all of it.
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		counted := time.Now()
		behind, err := db.Activity.Behind(ctx)
		if err != nil {
			return 0, fmt.Errorf("bench growth: catch-up: %w", err)
		}
		if behind == 0 {
			break
		}
		wait.Reset(max(2*time.Millisecond, 9*time.Since(counted)))
		select {
		case <-wait.C:
		case err := <-ran:
			return 0, fmt.Errorf("bench growth: catch-up: the runner stopped %d events behind: %w", behind, err)
		case <-ctx.Done():
			return 0, fmt.Errorf("bench growth: catch-up: %d events behind: %w", behind, ctx.Err())
		}
	}
	elapsed := time.Since(began)
	stop()
	if err := <-ran; err != nil {
		return 0, err
	}
	return float64(n) / elapsed.Seconds(), nil
}

// loads times load of each of up to n streams, one read-only unit of work
// each, and returns the p99.
func (b Bench) loads(ctx context.Context, streams []string, n int, load func(ctx context.Context, tx uow.Tx, stream string) error) (time.Duration, error) {
	var lat []time.Duration
	for _, s := range streams[:min(n, len(streams))] {
		began := time.Now()
		if err := b.Runner.Read(ctx, func(ctx context.Context, tx uow.Tx) error { return load(ctx, tx, s) }); err != nil {
			return 0, fmt.Errorf("bench growth: load %s: %w", s, err)
		}
		lat = append(lat, time.Since(began))
	}
	if len(lat) == 0 {
		return 0, nil
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, len(lat)*99/100)], nil
}
