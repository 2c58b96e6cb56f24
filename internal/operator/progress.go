package operator

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/eventsourced/accounts/internal/projections/async"
)

// progressLines reports a rebuild's progress as a plain line when it starts,
// every 5 seconds, and when it has caught up.
func progressLines(w io.Writer, name string) func(async.Progress) {
	var last time.Time
	return func(p async.Progress) {
		if done := p.Done == p.Total; done || time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(w, "%s version %d: %d of %d events applied\n", name, p.Version, p.Done, p.Total)
		}
	}
}

// progressBar reports a rebuild's progress as a bar on a terminal.
func progressBar(w io.Writer, name string) func(async.Progress) {
	var bar *progressbar.ProgressBar
	return func(p async.Progress) {
		if bar == nil {
			bar = progressbar.NewOptions64(max(p.Total, 1),
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(fmt.Sprintf("%s version %d", name, p.Version)),
				progressbar.OptionShowCount(),
				progressbar.OptionSetItsString("events"),
				progressbar.OptionShowIts(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
			)
		}
		if p.Total > bar.GetMax64() {
			bar.ChangeMax64(p.Total)
		}
		_ = bar.Set64(p.Done)
	}
}
