package bench

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"time"

	"golang.org/x/term"
)

// Profiles names the files a [Timed] benchmark writes of its timed part;
// an empty name writes nothing.
type Profiles struct {
	// CPU is a CPU profile, for go tool pprof.
	CPU string
	// Trace is an execution trace, for go tool trace: where goroutines
	// waited, for a latency rather than a rate.
	Trace string
}

// Timed returns the usual [Timing]: it writes the profiles p of the timed
// part and, when progress is a terminal, a line once a second that says
// how far the benchmark named name has come.
func Timed(name string, p Profiles, progress io.Writer, log *slog.Logger) Timing {
	return func(count func() int64) func() {
		stopProfile, stopTrace := func() {}, func() {}
		if p.CPU != "" {
			stopProfile = record(p.CPU, "cpu profile", pprof.StartCPUProfile, pprof.StopCPUProfile, log)
		}
		if p.Trace != "" {
			stopTrace = record(p.Trace, "trace", trace.Start, trace.Stop, log)
		}
		stopProgress := showProgress(progress, name, count)
		var once sync.Once
		return func() { once.Do(func() { stopProgress(); stopProfile(); stopTrace() }) }
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

// record writes what start begins into the file at path until the returned
// function is called, which calls stop. A failure is logged: the benchmark
// runs on without it.
func record(path, what string, start func(io.Writer) error, stop func(), log *slog.Logger) func() {
	f, err := os.Create(path)
	if err != nil {
		log.Error("bench: "+what, "error", err)
		return func() {}
	}
	if err := start(f); err != nil {
		log.Error("bench: "+what, "error", err)
		_ = f.Close()
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			_ = f.Close()
		})
	}
}
