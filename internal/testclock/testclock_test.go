package testclock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/testclock"
)

var start = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

func TestClock(t *testing.T) {
	t.Parallel()
	c := testclock.New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %s, want %s", got, start)
	}
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() moved by itself: %s, want %s", got, start)
	}
	c.Advance(90 * time.Second)
	if want := start.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Errorf("after Advance(90s): %s, want %s", c.Now(), want)
	}
	c.Advance(-time.Minute)
	if want := start.Add(30 * time.Second); !c.Now().Equal(want) {
		t.Errorf("after Advance(-1m): %s, want %s", c.Now(), want)
	}
	later := start.Add(24 * time.Hour)
	c.Set(later)
	if !c.Now().Equal(later) {
		t.Errorf("after Set: %s, want %s", c.Now(), later)
	}
	c.Set(start)
	if !c.Now().Equal(start) {
		t.Errorf("after Set back: %s, want %s", c.Now(), start)
	}
}

// TestClockConcurrent moves and reads the clock from many goroutines; the
// race detector checks the locking, and no Advance may be lost.
func TestClockConcurrent(t *testing.T) {
	t.Parallel()
	c := testclock.New(start)
	now := c.Now // as code under test holds it
	const n = 50
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c.Advance(time.Second)
			_ = now()
		})
	}
	wg.Wait()
	if want := start.Add(n * time.Second); !c.Now().Equal(want) {
		t.Errorf("after %d concurrent Advance(1s): %s, want %s", n, c.Now(), want)
	}
}
