package timingtest

import (
	"math"
	"slices"
)

// Median returns the median of xs, which it leaves as it was.
func Median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MannWhitneyP returns the two-sided p-value of the Mann-Whitney U test
// that xs and ys come from one distribution, by the normal approximation
// with a correction for ties and for continuity, which is close for
// samples of more than 20 each.
func MannWhitneyP(xs, ys []float64) float64 {
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
