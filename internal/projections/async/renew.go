package async

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
)

// Progress is how far [Renew] has come.
type Progress struct {
	// Version is the version being built.
	Version int
	// Done counts the events of the projection's types the new version
	// has applied, of Total in the log.
	Done, Total int64
}

// renewTick is how often Renew looks at how far the new version has come,
// at most: the count of what it has still to apply reads every event
// after its offset, so a rebuild of a long log waits renewShare times as
// long as the last count took before the next, which keeps the counts to
// a tenth of a database connection's time instead of all of it, taken
// from the rebuild itself.
const (
	renewTick  = 200 * time.Millisecond
	renewShare = 9
)

// Renew rebuilds p blue/green: it builds a new version beside the one
// serving reads, from the start of the log, while that one keeps serving
// and following the log; once the new version has caught up it switches
// reads to it, drops the old version's tables and retires its offset, all
// in one transaction ([Log.Catalog]). It returns the versions it switched from and
// to, and reports progress, if given, as it goes.
//
// The new version is the serving one plus one, unless the registry names a
// version being built already (a rebuild that did not finish, or one that
// another process is running): Renew then takes that one up. It runs the
// new version itself, with a [Runner] made with opts, so that the rebuild
// goes on whether or not other instances run the projection; those that do
// build it too, taking turns on its offset, and leave the old version once
// reads have switched. A read in flight during the switch finishes on the
// old version; one that comes during it waits for it, and reads the new.
//
// When the new version fails, Renew returns its error and leaves it
// registered as being built: a fixed version of the projection takes it up
// where it stopped, at the next Renew or in any instance's runner.
func Renew(ctx context.Context, log Log, p projections.Rebuildable, progress func(Progress), opts ...RunnerOption) (from, to int, err error) {
	base := p.Version()
	err = log.Catalog(ctx, p.Name(), base, func(ctx context.Context, tx uow.Tx, v projections.Versions) (projections.Versions, error) {
		from, to = v.Serving, v.Building
		if to != 0 {
			return v, nil
		}
		to = v.Serving + 1
		next := p.At(to)
		if err := next.Create(ctx, tx); err != nil {
			return v, err
		}
		if err := next.Reset(ctx, tx); err != nil {
			return v, err
		}
		if err := log.Forget(ctx, tx, projections.Group(next)); err != nil {
			return v, err
		}
		return projections.Versions{Serving: v.Serving, Building: to}, nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("projections: renew %s: %w", p.Name(), err)
	}
	next := p.At(to)
	group := projections.Group(next)
	runner, err := NewRunner(log, []projections.Projection{next}, opts...)
	if err != nil {
		return from, to, err
	}
	defer runner.Close()
	runner.fixed = true
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- runner.Run(runCtx) }()
	defer func() {
		stop()
		if rerr := <-ran; rerr != nil && err == nil {
			err = rerr
		}
	}()

	var total int64
	wait := time.NewTimer(renewTick)
	defer wait.Stop()
	for {
		counted := time.Now()
		behind, _, err := log.Behind(ctx, group, next.Types())
		wait.Reset(max(renewTick, renewShare*time.Since(counted)))
		if err != nil && !errors.Is(err, uow.ErrUnavailable) {
			return from, to, fmt.Errorf("projections: renew %s: %w", p.Name(), err)
		}
		if err == nil {
			total = max(total, behind)
			if progress != nil {
				progress(Progress{Version: to, Done: total - behind, Total: total})
			}
			if behind == 0 {
				break
			}
		}
		for _, s := range runner.Status() {
			if s.State == StateFailed {
				return from, to, fmt.Errorf("projections: renew %s: version %d failed at %s: %w", p.Name(), to, projections.FormatPosition(s.Position), s.Err)
			}
		}
		select {
		case <-wait.C:
		case <-ctx.Done():
			return from, to, fmt.Errorf("projections: renew %s: version %d is %d events behind: %w", p.Name(), to, behind, ctx.Err())
		case err := <-ran:
			ran <- err
			if err == nil {
				err = errors.New("it stopped")
			}
			return from, to, fmt.Errorf("projections: renew %s: the runner of version %d: %w", p.Name(), to, err)
		}
	}
	err = log.Catalog(ctx, p.Name(), base, func(ctx context.Context, tx uow.Tx, v projections.Versions) (projections.Versions, error) {
		switch {
		case v.Serving == to && v.Building == 0:
			// Another process switched already.
			return v, nil
		case v.Building != to:
			return v, fmt.Errorf("the registry now builds version %d and serves %d, not %d", v.Building, v.Serving, to)
		}
		from = v.Serving
		// The old version's offset first: it waits for a batch of it in
		// flight, which should not hold up the reads that Serve makes
		// wait for the commit.
		old := p.At(from)
		if err := log.Retire(ctx, tx, projections.Group(old)); err != nil {
			return v, err
		}
		if err := next.Serve(ctx, tx); err != nil {
			return v, err
		}
		if err := old.Drop(ctx, tx); err != nil {
			return v, err
		}
		return projections.Versions{Serving: to}, nil
	})
	if err != nil {
		return from, to, fmt.Errorf("projections: renew %s: switch to version %d: %w", p.Name(), to, err)
	}
	return from, to, nil
}
