package timingtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The bounds of a measurement.
const (
	// WarmUp is how many pairs of calls run first, untimed, so that
	// connections, statements and caches are warm for both kinds.
	WarmUp = 50
	// MaxRatio bounds the median ratio of the two kinds' calls timed
	// together, either way round.
	MaxRatio = 1.05
	// Alpha is the significance level of the Mann-Whitney U test: a
	// p-value below it says the two kinds take different times.
	Alpha = 0.01
	// Tries is how many times [Measure] measures before it fails.
	Tries = 3
)

// Pairs calls x and y with each i from n to n+[WarmUp]-1, untimed, and
// then times them with each i from 0 to n-1, in pairs: one of each kind
// in a random order. It returns the times of x's n timed calls and of
// y's, in seconds. x and y make the ith call of their kind, and fail the
// test themselves on an error.
func Pairs(n int, x, y func(i int)) (xs, ys []float64) {
	for i := range WarmUp {
		x(n + i)
		y(n + i)
	}
	timed := func(call func(int), i int) float64 {
		began := time.Now()
		call(i)
		return time.Since(began).Seconds()
	}
	xs, ys = make([]float64, n), make([]float64, n)
	for i := range n {
		if rand.IntN(2) == 0 {
			xs[i] = timed(x, i)
			ys[i] = timed(y, i)
		} else {
			ys[i] = timed(y, i)
			xs[i] = timed(x, i)
		}
	}
	return xs, ys
}

// Result is what [Compare] finds of two kinds' times.
type Result struct {
	// N is how many calls of each kind were timed.
	N int
	// MedianX and MedianY are the kinds' medians, in seconds.
	MedianX, MedianY float64
	// PairRatio is the median, over the pairs of calls timed together,
	// of the time of y's call over x's.
	PairRatio float64
	// P is the p-value of the Mann-Whitney U test ([MannWhitneyP]).
	P float64
}

// Compare returns what the times xs and ys of the pairs of calls that
// [Pairs] timed tell: xs[i] and ys[i] were timed together. It gives the
// kinds' medians, the median of the pairs' ratios, and the p-value of
// the Mann-Whitney U test that the two kinds' times come from one
// distribution.
func Compare(xs, ys []float64) Result {
	ratios := make([]float64, len(xs))
	for i := range xs {
		ratios[i] = ys[i] / xs[i]
	}
	return Result{N: len(xs), MedianX: Median(xs), MedianY: Median(ys), PairRatio: Median(ratios), P: MannWhitneyP(xs, ys)}
}

// Ratio returns the median of the pairs' ratios, y's time over x's.
func (r Result) Ratio() float64 { return r.PairRatio }

// Err returns an error that names each bound r misses, or nil when the
// pairs' median ratio is within a factor of [MaxRatio] of 1 and P is at
// least [Alpha].
func (r Result) Err() error {
	var failed []string
	// Times of zero give no ratio, NaN, which misses the bound too.
	if factor := max(r.PairRatio, 1/r.PairRatio); !(factor <= MaxRatio) {
		failed = append(failed, fmt.Sprintf("the pairs of calls differ by a median factor of %.3f, more than %.2f", factor, MaxRatio))
	}
	if r.P < Alpha {
		failed = append(failed, fmt.Sprintf("the Mann-Whitney U test tells them apart, p = %.4f below %.2f", r.P, Alpha))
	}
	if len(failed) == 0 {
		return nil
	}
	return errors.New(strings.Join(failed, "; "))
}

// Measure fails t unless one of up to [Tries] measurements finds two
// kinds of call alike ([Result.Err]), and logs each. measure returns the
// times of the try's calls of kind x and of kind y ([Pairs]); each try
// makes calls of its own, to new addresses say, as comparable between
// the kinds as the first try's. x and y describe the kinds in the log,
// as in "for a fresh address".
func Measure(t testing.TB, x, y string, measure func(try int) (xs, ys []float64)) {
	t.Helper()
	var failures []string
	for try := range Tries {
		r := Compare(measure(try))
		t.Logf("%d calls of each kind: median %.3f ms %s, %.3f ms %s (pairs' median ratio %.3f); Mann-Whitney U p = %.3f",
			r.N, r.MedianX*1e3, x, r.MedianY*1e3, y, r.Ratio(), r.P)
		err := r.Err()
		if err == nil {
			return
		}
		failures = append(failures, fmt.Sprintf("measurement %d: %v", try+1, err))
	}
	t.Errorf("the two kinds of call take different times:\n%s", strings.Join(failures, "\n"))
}
