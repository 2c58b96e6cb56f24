package bench

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"golang.org/x/term"
)

// Timed returns the usual [Timing]: it writes a CPU profile of the timed
// part to cpuprofile, unless empty, and, when progress is a terminal, a
// line once a second that says how far the benchmark named name has come.
func Timed(name, cpuprofile string, progress io.Writer, log *slog.Logger) Timing {
	return func(count func() int64) func() {
		stopProfile := func() {}
		if cpuprofile != "" {
			stopProfile = profileCPU(cpuprofile, log)
		}
		stopProgress := showProgress(progress, name, count)
		var once sync.Once
		return func() { once.Do(func() { stopProgress(); stopProfile() }) }
	}
}

// showProgress writes, once a second while the timed part runs and only
// when w is a terminal, a line that says how far the benchmark has come,
// and clears it when the returned function is called.
func showProgress(w io.Writer, name string, count func() int64) (stop func()) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(f, "\r\033[K")
				return
			case <-tick.C:
				n, secs := count(), time.Since(began).Seconds()
				fmt.Fprintf(f, "\r\033[K%s: %d in %.0fs, %.0f/s", name, n, secs, float64(n)/secs)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// profileCPU writes a CPU profile to path until the returned function is
// called.
func profileCPU(path string, log *slog.Logger) func() {
	f, err := os.Create(path)
	if err != nil {
		log.Error("bench: cpu profile", "error", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Error("bench: cpu profile", "error", err)
		_ = f.Close()
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}
}
