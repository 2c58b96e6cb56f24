package relay

import (
	"context"
	"sync"
)

// semaphore bounds how many messages a relay holds: claimed, or taken from a
// unit of work ([outbox.Handover]), and not yet settled in the store. A
// message acquires a slot when it is claimed or taken and releases it once
// its outcome is recorded (its acknowledgement written, its retry or burial
// recorded, or its release to the store), or once the unit of work that it
// was taken from rolls back.
type semaphore struct {
	mu   sync.Mutex
	free int
	size int
	// released receives a value when slots are released, for the claiming
	// loop that waits for a batch's worth.
	released chan struct{}
	// idle, when not nil, is closed once every slot is free.
	idle chan struct{}
}

func newSemaphore(size int) *semaphore {
	return &semaphore{free: size, size: size, released: make(chan struct{}, 1)}
}

// available returns how many slots are free.
func (s *semaphore) available() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free
}

// tryAcquire acquires up to n free slots and returns how many it acquired.
func (s *semaphore) tryAcquire(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(n, s.free)
	s.free -= n
	return n
}

// tryAcquireLeaving acquires n slots when at least leave more stay free,
// and reports whether it did.
func (s *semaphore) tryAcquireLeaving(n, leave int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free-n < leave {
		return false
	}
	s.free -= n
	return true
}

// release releases n slots.
func (s *semaphore) release(n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.free += n
	if s.free == s.size && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
	select {
	case s.released <- struct{}{}:
	default:
	}
}

// waitIdle returns once every slot is free, or ctx's error when it ends
// first.
func (s *semaphore) waitIdle(ctx context.Context) error {
	s.mu.Lock()
	if s.free == s.size {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
