package testclock

import (
	"sync"
	"time"
)

// Clock is a clock that stands still until it is set or advanced. It is safe
// for concurrent use, so that the code under test may read it from other
// goroutines while the test moves it. Use [New] to make one.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads t until it is set or advanced.
func New(t time.Time) *Clock {
	return &Clock{now: t}
}

// Now returns the clock's time. Its method value c.Now serves wherever a
// func() time.Time is wanted.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, forward or back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock on by d, or back when d is negative.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
