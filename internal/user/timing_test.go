package user_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/user"
)

// The measurement of TestSignInLinkRequestTimeTellsNothing.
const (
	// timingWarmUp is how many of each kind run first, untimed, so that
	// connections, statements and caches are warm for both.
	timingWarmUp = 50
	// timingMaxRatio bounds the ratio of the two medians.
	timingMaxRatio = 1.05
	// timingAlpha is the significance level of the Mann-Whitney U test:
	// a p-value below it says the two kinds take different times.
	timingAlpha = 0.01
	// timingTries is how many times the test measures before it fails.
	timingTries = 3
)

// A request for a sign-in link takes as long for an address that asked
// for one a minute ago as for an address that never asked, so that its
// time does not tell an observer whether the address is in use: their
// medians are within 5% of each other, and a Mann-Whitney U test finds no
// difference at the 1% level.
//
// The requests go in pairs, one of each kind in a random order, so that
// whatever else the machine does meanwhile slows both kinds alike. Each
// kind commits once, so the commit waits for no disk (PostgreSQL's
// synchronous_commit off, SQLite's file in memory where the system has a
// file system there): a flush on a disk that others share varies by
// milliseconds and would hide the difference the test looks for. A
// machine busy with other work can still move the medians of one
// measurement apart by chance, so the test measures again, with new
// addresses, up to timingTries times; it fails when no measurement meets
// both bounds. It runs alone, not in parallel, since it measures time.
//
// What an observer times is the service as it is built to run, so a test
// binary built with the race detector measures in one built without it
// (measureWithoutRaceDetector): the detector slows every memory access of
// Go code several times over, and SQLite's driver is Go code, so it would
// turn each row that one kind reads and the other does not into a
// difference the service as it runs does not have.
func TestSignInLinkRequestTimeTellsNothing(t *testing.T) {
	// How many requests of each kind are timed: SQLite's run in the
	// process and vary less.
	for backend, samples := range map[string]int{"PostgreSQL": 800, "SQLite": 300} {
		t.Run(backend, func(t *testing.T) {
			if raceDetector {
				measureWithoutRaceDetector(t)
				return
			}
			clock := testclock.New(start)
			svc := timingService(t, backend, clock)
			var failures []string
			for try := range timingTries {
				fresh, asked := timeSignInLinkRequests(t, svc, clock, try, samples)
				mf, ma := median(fresh), median(asked)
				p := mannWhitneyP(fresh, asked)
				t.Logf("%d requests of each kind: median %.3f ms for a fresh address, %.3f ms for one that asked a minute ago (ratio %.3f); Mann-Whitney U p = %.3f",
					samples, mf*1e3, ma*1e3, ma/mf, p)
				var failed []string
				if ratio := max(mf, ma) / min(mf, ma); ratio > timingMaxRatio {
					failed = append(failed, fmt.Sprintf("the medians differ by a factor of %.3f, more than %.2f", ratio, timingMaxRatio))
				}
				if p < timingAlpha {
					failed = append(failed, fmt.Sprintf("the Mann-Whitney U test tells them apart, p = %.4f below %.2f", p, timingAlpha))
				}
				if len(failed) == 0 {
					return
				}
				failures = append(failures, fmt.Sprintf("measurement %d: %s", try+1, strings.Join(failed, "; ")))
			}
			t.Errorf("the two kinds of request take different times:\n%s", strings.Join(failures, "\n"))
		})
	}
}

// measureWithoutRaceDetector runs the test t, of a binary built with the
// race detector, in one built without it: go test, in this package's
// directory, with the same environment, and fails as that run fails.
func measureWithoutRaceDetector(t *testing.T) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	pattern := "^" + strings.ReplaceAll(t.Name(), "/", "$/^") + "$"
	cmd := exec.CommandContext(t.Context(), goTool, "test", "-race=false", "-count=1", "-v", "-run", pattern, ".")
	out, err := cmd.CombinedOutput()
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "median") || strings.Contains(line, "measurement") {
			t.Log(strings.TrimSpace(line))
		}
	}
	if err != nil {
		t.Fatalf("%s without the race detector: %v\n%s", cmd, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s without the race detector ran no such test:\n%s", cmd, out)
	}
}

// timeSignInLinkRequests returns the times of n requests for a sign-in
// link to addresses that never asked for one and of n to addresses that
// asked for one a minute before, timed in pairs; try names the addresses
// apart from those of other tries.
func timeSignInLinkRequests(t *testing.T, svc *user.Service, clock *testclock.Clock, try, n int) (fresh, asked []float64) {
	t.Helper()
	request := func(kind string, i int) float64 {
		t.Helper()
		address := fmt.Sprintf("%s-%d-%d@example.com", kind, try, i)
		began := time.Now()
		err := svc.RequestSignInLink(t.Context(), address)
		took := time.Since(began)
		if err != nil {
			t.Fatalf("a link for %s: %v", address, err)
		}
		return took.Seconds()
	}
	for i := range n + timingWarmUp {
		request("asked", i)
	}
	clock.Advance(time.Minute)
	for i := range timingWarmUp {
		request("fresh", n+i)
		request("asked", n+i)
	}
	fresh, asked = make([]float64, n), make([]float64, n)
	for i := range n {
		if rand.IntN(2) == 0 {
			fresh[i] = request("fresh", i)
			asked[i] = request("asked", i)
		} else {
			asked[i] = request("asked", i)
			fresh[i] = request("fresh", i)
		}
	}
	return fresh, asked
}

// timingService returns a service on a fresh database of backend, whose
// units of work read clock and commit without waiting for a disk.
func timingService(t *testing.T, backend string, clock *testclock.Clock) *user.Service {
	t.Helper()
	var d user.Deps
	switch backend {
	case "PostgreSQL":
		u, err := url.Parse(pgtest.NewURL(t))
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("synchronous_commit", "off")
		u.RawQuery = q.Encode()
		db, err := postgres.Open(t.Context(), u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if _, err := db.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		d = user.Deps{Runner: db.Runner(clock.Now), Events: db.Events(), Outbox: db.Outbox(), Views: postgres.UserViews{}, Keys: keyringtest.New(t, postgres.DataKeys{})}
	case "SQLite":
		dir := t.TempDir()
		if memory, err := os.MkdirTemp("/dev/shm", "timing-"); err == nil {
			dir = memory
			t.Cleanup(func() { _ = os.RemoveAll(memory) })
		}
		db := sqlitetest.NewAt(t, filepath.Join(dir, "timing.db"))
		d = user.Deps{Runner: db.Runner(clock.Now), Events: db.Events(), Outbox: db.Outbox(), Views: sqlite.UserViews{}, Keys: keyringtest.New(t, sqlite.DataKeys{})}
	default:
		t.Fatalf("no backend %q", backend)
	}
	svc, err := user.NewService(d, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// median returns the median of xs, which it leaves as it was.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// mannWhitneyP returns the two-sided p-value of the Mann-Whitney U test
// that xs and ys come from one distribution, by the normal approximation
// with a correction for ties and for continuity, which is close for
// samples of more than 20 each.
func mannWhitneyP(xs, ys []float64) float64 {
	type sample struct {
		v   float64
		inX bool
	}
	all := make([]sample, 0, len(xs)+len(ys))
	for _, x := range xs {
		all = append(all, sample{x, true})
	}
	for _, y := range ys {
		all = append(all, sample{y, false})
	}
	slices.SortFunc(all, func(a, b sample) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	// The rank sum of xs, tied values sharing the mean of their ranks.
	var rankX, ties float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // The mean of ranks i+1 to j.
		for _, s := range all[i:j] {
			if s.inX {
				rankX += rank
			}
		}
		tied := float64(j - i)
		ties += tied*tied*tied - tied
		i = j
	}
	n1, n2 := float64(len(xs)), float64(len(ys))
	n := n1 + n2
	u := rankX - n1*(n1+1)/2
	mean := n1 * n2 / 2
	sd := math.Sqrt(n1 * n2 / 12 * ((n + 1) - ties/(n*(n-1))))
	if sd == 0 {
		return 1
	}
	z := math.Max(math.Abs(u-mean)-0.5, 0) / sd
	return math.Erfc(z / math.Sqrt2)
}

// mannWhitneyP gives the p-values of R's wilcox.test(x, y, exact = FALSE,
// correct = TRUE): for two samples alike, two apart, two interleaved and
// two with ties.
func TestMannWhitneyP(t *testing.T) {
	t.Parallel()
	seq := func(from, step, n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(from + i*step)
		}
		return xs
	}
	for _, tc := range []struct {
		name   string
		xs, ys []float64
		want   float64
	}{
		{"alike", seq(1, 1, 30), seq(1, 1, 30), 1},
		{"apart", seq(1, 1, 30), seq(31, 1, 30), 3.019859359162151e-11},
		{"interleaved", seq(1, 2, 30), seq(2, 2, 30), 0.8302552839111963},
		{"with ties", []float64{1, 1, 1, 2, 2}, []float64{2, 2, 3, 3, 3}, 0.026888454103745792},
	} {
		if got := mannWhitneyP(tc.xs, tc.ys); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s: p = %g, want %g", tc.name, got, tc.want)
		}
	}
}
