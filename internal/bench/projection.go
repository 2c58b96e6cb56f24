package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// accounts is how many accounts the projection benchmarks' events are
// spread over, so that the activity table grows as it does in use: many
// accounts, each with a history.
const accounts = 300

// Projection appends n events of the activity's types, spread over many
// accounts, their addresses sealed with keys, in units of work of 1000,
// then times a runner of activity alone, following [Bench.EventLog],
// until it has applied all of them and its committed offset leaves none
// behind.
func (b Bench) Projection(ctx context.Context, activity user.ActivityProjection, keys *keyring.Keyring, n int) error {
	users := make([]uuid.UUID, accounts)
	for u := range users {
		users[u] = uuid.New()
	}
	const perTx = 1000
	for start := 0; start < n; start += perTx {
		err := b.Runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			ctx = keyring.Within(ctx, tx)
			streams := make(map[uuid.UUID][]eventstore.Event, len(users))
			for i := start; i < min(start+perTx, n); i++ {
				id := users[i%len(users)]
				ev, err := activityEvent(ctx, tx, keys, id, i/len(users), i)
				if err != nil {
					return err
				}
				streams[id] = append(streams[id], ev)
			}
			for id, evs := range streams {
				if _, err := b.Events.Append(ctx, tx, "user-"+id.String(), eventstore.Any, evs...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("bench projection: fill: %w", err)
		}
	}
	w := watch(activity, n)
	stopProfile := b.timed(func() int64 { return int64(w.count()) })
	defer stopProfile()
	began := time.Now()
	stop, ran, err := b.runProjection(ctx, w)
	if err != nil {
		return err
	}
	defer stop()
	select {
	case <-w.all:
	case err := <-ran:
		return fmt.Errorf("bench projection: runner stopped after %d of %d events: %w", w.count(), n, err)
	case <-ctx.Done():
		elapsed := time.Since(began)
		stopProfile()
		stop()
		<-ran
		done := w.count()
		fmt.Fprintf(b.Out, "projection: %d events in %.2fs, %.0f events/s (cut short: %d of %d)\n",
			done, elapsed.Seconds(), float64(done)/elapsed.Seconds(), done, n)
		return &CutShortError{Name: "bench projection", Done: int64(done), Of: int64(n), Err: ctx.Err()}
	}
	// The last batch commits after its last event is applied: the figure
	// counts up to that commit.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		behind, err := activity.Behind(ctx)
		if err != nil {
			return fmt.Errorf("bench projection: %w", err)
		}
		if behind == 0 {
			break
		}
		select {
		case <-tick.C:
		case err := <-ran:
			return fmt.Errorf("bench projection: runner stopped %d events behind: %w", behind, err)
		case <-ctx.Done():
			return fmt.Errorf("bench projection: %d events behind: %w", behind, ctx.Err())
		}
	}
	elapsed := time.Since(began)
	stopProfile()
	stop()
	if err := <-ran; err != nil {
		return err
	}
	fmt.Fprintf(b.Out, "projection: %d events in %.2fs, %.0f events/s\n", n, elapsed.Seconds(), float64(n)/elapsed.Seconds())
	return nil
}

// ProjectionLag runs activity, following [Bench.EventLog], while it commits rate units
// of work a second for d, each appending one sign-in, on a schedule that
// does not wait for the projection, and measures for each event the time
// from the moment its transaction asked to commit to the moment the
// projection applied it. Sign-ins carry no address: activity needs no
// keys.
func (b Bench) ProjectionLag(ctx context.Context, activity projections.Projection, rate int, d time.Duration) error {
	n := max(int(d.Seconds()*float64(rate)), 1)
	users := make([]uuid.UUID, accounts)
	for u := range users {
		users[u] = uuid.New()
	}
	sent := make([]time.Time, n)
	ids := make([]uuid.UUID, n)
	w := watch(activity, n+1)
	stop, ran, err := b.runProjection(ctx, w)
	if err != nil {
		return err
	}
	defer stop()

	send := func(seq int) error {
		for {
			err := b.Runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
				id := users[(seq+len(users))%len(users)]
				ev, err := activityEvent(ctx, tx, nil, id, 1, seq)
				if err != nil {
					return err
				}
				if _, err := b.Events.Append(ctx, tx, "user-"+id.String(), eventstore.Any, ev); err != nil {
					return err
				}
				if seq >= 0 {
					ids[seq], sent[seq] = ev.ID, time.Now()
				}
				return nil
			})
			// Two sign-ins of one account may race under Any; the
			// loser appends again on the stream's new state.
			if !errors.Is(err, eventstore.ErrConcurrency) {
				return err
			}
		}
	}
	// One event first, so the runner follows the log before timing starts.
	if err := send(-1); err != nil {
		return err
	}
	select {
	case <-w.first:
	case err := <-ran:
		return fmt.Errorf("bench projection: warm-up: runner stopped: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("bench projection: warm-up: %w", ctx.Err())
	}

	stopProfile := b.timed(func() int64 { return int64(w.count()) })
	defer stopProfile()
	cut, err := pacedUntil(ctx, OpenLoop, n, rate, send, w.all, ran)
	if errors.Is(err, errStopped) {
		return fmt.Errorf("bench projection: runner %w after %d of %d events", err, w.count()-1, n)
	}
	if err != nil {
		return fmt.Errorf("bench projection: %w", err)
	}
	stopProfile()
	stop()
	if err := <-ran; err != nil && cut == nil {
		return err
	}
	var lat []time.Duration
	for i := range n {
		at, ok := w.appliedAt(ids[i])
		if !ok || sent[i].IsZero() {
			if cut == nil {
				return fmt.Errorf("bench projection: event %s was not applied", ids[i])
			}
			continue
		}
		lat = append(lat, at.Sub(sent[i]))
	}
	if len(lat) == 0 {
		fmt.Fprintf(b.Out, "projection lag: rate=%d/s n=0 (cut short: 0 of %d)\n", rate, n)
		return &CutShortError{Name: "bench projection", Of: int64(n), Err: cut}
	}
	slices.Sort(lat)
	line := fmt.Sprintf("projection lag: rate=%d/s n=%d p50=%s p90=%s p99=%s max=%s",
		rate, len(lat), percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99), ms(lat[len(lat)-1]))
	if cut != nil {
		fmt.Fprintf(b.Out, "%s (cut short: %d of %d)\n", line, len(lat), n)
		return &CutShortError{Name: "bench projection", Done: int64(len(lat)), Of: int64(n), Err: cut}
	}
	fmt.Fprintln(b.Out, line)
	return nil
}

// runProjection runs a runner of p alone over [Bench.EventLog] until stop
// is called, and reports Run's error on ran.
func (b Bench) runProjection(ctx context.Context, p projections.Projection) (stop context.CancelFunc, ran <-chan error, err error) {
	runner, err := async.NewRunner(b.EventLog, []projections.Projection{p}, async.WithRunnerLogger(b.log()))
	if err != nil {
		return nil, nil, err
	}
	ctx, stop = context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		err := runner.Run(ctx)
		_ = runner.Close()
		errc <- err
	}()
	return stop, errc, nil
}

// activityEvent returns the k-th event of account id's history as the
// activity projection reads it, its address sealed with keys as part of
// tx: its registration, then sign-ins, sign-outs, and changes of address
// asked for and confirmed, in turn; i, which may be negative, makes its
// secrets distinct.
func activityEvent(ctx context.Context, tx uow.Tx, keys *keyring.Keyring, id uuid.UUID, k, i int) (eventstore.Event, error) {
	now := tx.Now()
	hash := fmt.Sprintf("%064x", uint64(i))
	token, err := user.ParseTokenHash(hash)
	if err != nil {
		return eventstore.Event{}, err
	}
	var data any
	switch k % 4 {
	case 1:
		data = user.SessionStarted{TokenHash: token, ExpiresAt: now.Add(30 * 24 * time.Hour)}
	case 2:
		data = user.SessionEnded{TokenHash: token}
	default:
		email, err := keys.Seal(ctx, tx, "user-"+id.String(), fmt.Sprintf("bench-%d@example.com", i))
		if err != nil {
			return eventstore.Event{}, err
		}
		switch {
		case k == 0:
			data = user.Registered{UserID: id, Email: email}
		case k%4 == 3:
			data = user.EmailChangeRequested{UserID: id, NewEmail: email, CodeHash: hash, ExpiresAt: now.Add(time.Hour)}
		default:
			data = user.EmailChanged{UserID: id, OldEmail: email, NewEmail: email, CodeHash: hash}
		}
	}
	// Made through the registry, at each type's current version, as the
	// service makes them.
	return user.Events().New(data, eventstore.Metadata{})
}
