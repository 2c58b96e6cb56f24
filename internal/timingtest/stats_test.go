package timingtest_test

import (
	"math"
	"slices"
	"testing"

	"github.com/eventsourced/accounts/internal/timingtest"
)

// seq returns n numbers from from, step apart.
func seq(from, step, n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(from + i*step)
	}
	return xs
}

// Median takes the middle value of an odd count, the mean of the two
// middle values of an even one, and leaves its argument as it was.
func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
	} {
		before := slices.Clone(tc.xs)
		if got := timingtest.Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %g, want %g", before, got, tc.want)
		}
		if !slices.Equal(tc.xs, before) {
			t.Errorf("Median(%v) reordered its argument to %v", before, tc.xs)
		}
	}
}

// MannWhitneyP gives the p-values of R's wilcox.test(x, y, exact = FALSE,
// correct = TRUE): for two samples alike, two apart, two interleaved and
// two with ties.
func TestMannWhitneyP(t *testing.T) {
	t.Parallel()
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
		if got := timingtest.MannWhitneyP(tc.xs, tc.ys); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s: p = %g, want %g", tc.name, got, tc.want)
		}
	}
}
