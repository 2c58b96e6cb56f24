package wakeup

import (
	"context"
	"sync"
)

// Fanout wakes every channel subscribed to it. The zero value is not
// usable; call [New].
type Fanout struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// New returns a Fanout with no subscribers.
func New() *Fanout {
	return &Fanout{subs: make(map[chan struct{}]struct{})}
}

// Subscription is one channel of a [Fanout].
type Subscription struct {
	f  *Fanout
	ch chan struct{}
}

// Subscribe returns a subscription whose channel [Fanout.Wake] sends to
// until ctx is done; the channel is then closed.
func (f *Fanout) Subscribe(ctx context.Context) Subscription {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, ch)
		close(ch)
	})
	return Subscription{f: f, ch: ch}
}

// C returns the channel of s. It holds at most one wake-up: one that finds
// it full coalesces with the one waiting there.
func (s Subscription) C() <-chan struct{} { return s.ch }

// Wake wakes the channel of s alone, without blocking; once the context of
// s is done it does nothing.
func (s Subscription) Wake() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if _, ok := s.f.subs[s.ch]; ok {
		send(s.ch)
	}
}

// Wake wakes every subscribed channel, without blocking.
func (f *Fanout) Wake() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		send(ch)
	}
}

// send puts a wake-up in ch unless one waits there already.
func send(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
