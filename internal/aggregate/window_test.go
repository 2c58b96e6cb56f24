package aggregate_test

import (
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/aggregate"
)

func TestWindowRetryAfter(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	w := aggregate.Window{Limit: 2, Per: time.Hour}
	at := func(minutes ...int) []time.Time {
		var out []time.Time
		for _, m := range minutes {
			out = append(out, t0.Add(time.Duration(m)*time.Minute))
		}
		return out
	}
	for _, c := range []struct {
		name     string
		requests []time.Time
		now      time.Time
		want     time.Duration
	}{
		{"none before", nil, t0, 0},
		{"under the limit", at(0), t0.Add(time.Minute), 0},
		{"at the limit: the older must leave", at(0, 10), t0.Add(20 * time.Minute), 40 * time.Minute},
		{"past the limit: the one that keeps the count must leave", at(0, 10, 30), t0.Add(40 * time.Minute), 30 * time.Minute},
		{"one left the window", at(0, 10), t0.Add(time.Hour), 0},
		{"the window is open at its start", at(0, 10), t0.Add(70 * time.Minute), 0},
	} {
		if got := w.RetryAfter(c.requests, c.now); got != c.want {
			t.Errorf("%s: RetryAfter = %s, want %s", c.name, got, c.want)
		}
	}
}
