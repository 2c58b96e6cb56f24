package timingtest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/timingtest"
)

// Result.Err accepts two kinds whose medians are within 5% and which the
// Mann-Whitney U test does not tell apart, and names each bound that two
// other kinds miss.
func TestCompare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		xs, ys []float64
		// want are the fragments of the error; none when it is nil.
		want []string
	}{
		{"alike", seq(1000, 2, 200), seq(1001, 2, 200), nil},
		// A load that comes and goes slows some pairs, and the two
		// calls of a pair alike but for a few: the kinds' medians fall
		// into different groups, and the pairs' ratios stay at 1.
		{"a load that comes and goes", []float64{1, 1, 1, 1.5, 1.5}, []float64{1, 1, 1.5, 1.5, 1.5}, nil},
		{"medians apart, too few to tell", []float64{1, 10, 100}, []float64{1.2, 11, 90}, []string{"factor of 1.100"}},
		{"medians close, told apart", seq(2000, 1, 200), seq(2050, 1, 200), []string{"Mann-Whitney"}},
		{"both", seq(1000, 1, 200), seq(1200, 1, 200), []string{"factor of 1.182", "Mann-Whitney"}},
		{"no time at all", make([]float64, 30), make([]float64, 30), []string{"factor of NaN"}},
	} {
		r := timingtest.Compare(tc.xs, tc.ys)
		err := r.Err()
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %+v: %v, want no error", tc.name, r, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: %+v: no error, want one naming %q", tc.name, r, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to name %q", tc.name, err, w)
			}
		}
		if named := strings.Count(err.Error(), ";") + 1; named != len(tc.want) {
			t.Errorf("%s: %v names %d bounds, want %d", tc.name, err, named, len(tc.want))
		}
	}
}

// recorder is a testing.TB that keeps what a test logs and its errors.
type recorder struct {
	testing.TB
	logs, errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// Measure stops at the first measurement that finds the kinds alike, and
// fails the test, naming each measurement, when none of [timingtest.Tries]
// does; it logs every measurement with the kinds' names.
func TestMeasure(t *testing.T) {
	t.Parallel()
	alike := func() ([]float64, []float64) { return seq(1000, 2, 200), seq(1001, 2, 200) }
	apart := func() ([]float64, []float64) { return seq(1000, 1, 200), seq(1200, 1, 200) }
	for _, tc := range []struct {
		name string
		// alikeAt is the try whose measurement is alike; -1 for none.
		alikeAt int
		tries   []int
		failed  bool
	}{
		{"alike at once", 0, []int{0}, false},
		{"alike at the second", 1, []int{0, 1}, false},
		{"never alike", -1, []int{0, 1, 2}, true},
	} {
		rec := &recorder{TB: t}
		var tries []int
		timingtest.Measure(rec, "for x", "for y", func(try int) ([]float64, []float64) {
			tries = append(tries, try)
			if try == tc.alikeAt {
				return alike()
			}
			return apart()
		})
		if !slices.Equal(tries, tc.tries) {
			t.Errorf("%s: measured tries %v, want %v", tc.name, tries, tc.tries)
		}
		if len(rec.logs) != len(tc.tries) {
			t.Errorf("%s: logged %q, want one line a measurement", tc.name, rec.logs)
		}
		for _, l := range rec.logs {
			if !strings.Contains(l, "200 calls of each kind") || !strings.Contains(l, "ms for x") || !strings.Contains(l, "ms for y") {
				t.Errorf("%s: logged %q, want the count and both kinds", tc.name, l)
			}
		}
		if failed := len(rec.errors) > 0; failed != tc.failed {
			t.Errorf("%s: failed %v (%q), want %v", tc.name, failed, rec.errors, tc.failed)
		}
		if tc.failed {
			if len(rec.errors) != 1 {
				t.Errorf("%s: %d errors, want one that names each measurement", tc.name, len(rec.errors))
				continue
			}
			for i := range timingtest.Tries {
				if !strings.Contains(rec.errors[0], fmt.Sprintf("measurement %d: ", i+1)) {
					t.Errorf("%s: %q does not name measurement %d", tc.name, rec.errors[0], i+1)
				}
			}
		}
	}
}

// Pairs calls each kind with the warm-up's indexes first, untimed, then
// with 0 to n-1, one call of each kind for each index in turn, and
// returns a time for each timed call.
func TestPairs(t *testing.T) {
	t.Parallel()
	const n = 40
	var calls []string
	call := func(kind string) func(int) {
		return func(i int) { calls = append(calls, fmt.Sprint(kind, i)) }
	}
	xs, ys := timingtest.Pairs(n, call("x"), call("y"))
	if len(xs) != n || len(ys) != n {
		t.Fatalf("Pairs returned %d and %d times, want %d of each", len(xs), len(ys), n)
	}
	for i, x := range append(xs, ys...) {
		if x < 0 {
			t.Errorf("time %d is %g, want none below 0", i, x)
		}
	}
	if len(calls) != 2*(n+timingtest.WarmUp) {
		t.Fatalf("Pairs made %d calls, want %d", len(calls), 2*(n+timingtest.WarmUp))
	}
	for i := range timingtest.WarmUp {
		if got := calls[2*i : 2*i+2]; !slices.Equal(got, []string{fmt.Sprint("x", n+i), fmt.Sprint("y", n+i)}) {
			t.Errorf("warm-up call pair %d is %v, want x and y with %d", i, got, n+i)
		}
	}
	orders := map[string]bool{}
	for i := range n {
		pair := slices.Clone(calls[2*(timingtest.WarmUp+i) : 2*(timingtest.WarmUp+i)+2])
		slices.Sort(pair)
		if want := []string{fmt.Sprint("x", i), fmt.Sprint("y", i)}; !slices.Equal(pair, want) {
			t.Errorf("timed pair %d is %v, want %v", i, pair, want)
		}
		orders[calls[2*(timingtest.WarmUp+i)][:1]] = true
	}
	if len(orders) != 2 {
		t.Errorf("every timed pair of %d began with the same kind, %v", n, orders)
	}
}
