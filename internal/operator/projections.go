package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/uow"
)

// logOrderFix says what sets right a log out of order
// ([projections.ErrLogOrder]).
const logOrderFix = "after a logical restore into another server, `app migrate` moves the log's clock on; " +
	"then `app projections rebuild activity` applies the events the projection passed over"

// Projections does the work of `app projections ...`, printing what it
// did to Out, and its progress to Err.
type Projections struct {
	// Log is the event log that the asynchronous projections follow.
	Log    async.Log
	Out    io.Writer
	Err    io.Writer
	Logger *slog.Logger
}

// RebuildViews rebuilds views, the inline user views, from every event of
// events, in units of work of runner.
func (o Projections) RebuildViews(ctx context.Context, runner uow.Runner, events eventstore.Store, views projections.Projection) error {
	out := o.Out
	n, err := projections.Rebuild(ctx, runner, events, views)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "rebuilt the user views from %d events\n", n)
	return nil
}

// RebuildBlueGreen rebuilds p blue/green from the log while the service
// serves, with a progress bar on Err when it is a terminal, and a line
// every few seconds otherwise.
func (o Projections) RebuildBlueGreen(ctx context.Context, p projections.Rebuildable) error {
	out, stderr := o.Out, o.Err
	report := progressLines(stderr, p.Name())
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		report = progressBar(stderr, p.Name())
	}
	from, to, err := async.Renew(ctx, o.Log, p, report, async.WithRunnerLogger(o.Logger))
	if errors.Is(err, projections.ErrLogOrder) {
		return fmt.Errorf("%w (%s)", err, logOrderFix)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "rebuilt %s: version %d serves reads; version %d is dropped\n", p.Name(), to, from)
	return nil
}

// Status prints a table of each version of each of ps, asynchronous
// projections following the log: how many events and seconds it is behind
// the head of the log, and its state: running (serving reads), rebuilding
// (built beside the one that serves), failed, or stuck; it returns an
// error when one has failed or is stuck. Only the projections' names,
// versions and types are read.
func (o Projections) Status(ctx context.Context, ps ...projections.Rebuildable) error {
	log := o.Log
	now := time.Now()
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PROJECTION\tVERSION\tBEHIND\tLAG\tSTATE")
	var failed []string
	for _, p := range ps {
		v, err := log.Versions(ctx, p.Name(), p.Version())
		if err != nil {
			return err
		}
		versions := []int{v.Serving}
		if v.Building != 0 {
			versions = append(versions, v.Building)
		}
		for _, version := range versions {
			g := projections.Group(p.At(version))
			n, oldest, err := log.Behind(ctx, g, p.Types())
			disorder := err
			if err != nil && !errors.Is(err, projections.ErrLogOrder) {
				return err
			}
			f, isFailed, err := log.Failure(ctx, g)
			if err != nil {
				return err
			}
			secs := 0.0
			if !oldest.IsZero() {
				secs = max(now.Sub(oldest).Seconds(), 0)
			}
			state := string(async.StateRunning)
			if version == v.Building {
				state = string(async.StateRebuilding)
			}
			if isFailed {
				state = fmt.Sprintf("failed at %s since %s: %s", projections.FormatPosition(f.Position), f.At.Format(time.RFC3339), f.Error)
				failed = append(failed, g)
			}
			if disorder != nil {
				state = fmt.Sprintf("stuck: %s (%s)", strings.ReplaceAll(disorder.Error(), "\n", "; "), logOrderFix)
				failed = append(failed, g)
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%.1fs\t%s\n", p.Name(), version, n, secs, state)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("projections: %s failed", strings.Join(failed, ", "))
	}
	return nil
}
