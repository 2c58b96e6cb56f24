package outbox

import (
	"context"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// subscriber is the Watermill [message.Subscriber] of a [Relay]: it claims
// batches of due messages from the store and hands them to the router,
// which runs each in a goroutine of its own.
//
// It claims whenever the relay's semaphore has a batch's worth of free
// slots: at once after a full batch, when the store wakes it (a commit
// added messages), when keyed messages were settled (the next of their
// keys are due), when a breaker's probe is due, or after
// [RelayConfig.Interval]. Since the semaphore holds four batches, it claims
// the next batch while the previous ones are delivered and acknowledged. It never holds a database transaction while a
// handler runs.
type subscriber struct {
	r       *Relay
	cur     cursor
	closing chan struct{}
	// cut, when not nil, ends the handlers' contexts once a stop's grace
	// has run out.
	cut   context.Context
	once  sync.Once
	loops sync.WaitGroup
}

var _ message.Subscriber = (*subscriber)(nil)

func newSubscriber(r *Relay) *subscriber {
	return &subscriber{r: r, closing: make(chan struct{})}
}

// Subscribe starts claiming. The topic is the relay's own; every outbox
// topic arrives on the returned channel, which is closed once the
// subscriber stops.
func (s *subscriber) Subscribe(ctx context.Context, _ string) (<-chan *message.Message, error) {
	out := make(chan *message.Message)
	ctx, cancel := context.WithCancel(ctx)
	wake := s.r.store.Wakeups(ctx)
	// One goroutine claims, another hands the claimed messages over, so
	// that the next claim runs while the router takes the last one's.
	claims := make(chan *claim, 4)
	s.loops.Add(2)
	go func() {
		defer s.loops.Done()
		defer close(claims)
		s.loop(ctx, claims, wake)
		cancel()
		// The listener has stopped once its channel is closed.
		for range wake {
		}
	}()
	go func() {
		defer s.loops.Done()
		defer close(out)
		s.handOver(ctx, claims, out)
	}()
	return out, nil
}

// Close stops claiming and waits until the subscriber has handed over or
// released what it claimed.
func (s *subscriber) Close() error {
	s.once.Do(func() { close(s.closing) })
	s.loops.Wait()
	return nil
}

func (s *subscriber) loop(ctx context.Context, claims chan<- *claim, wake <-chan struct{}) {
	r := s.r
	poll := time.NewTimer(r.cfg.Interval)
	defer poll.Stop()
	want := true // Claim once at start.
	for {
		r.inflight.sweep(r.now(), r.reportOverran)
		var released <-chan struct{}
		if want {
			if r.sem.available() >= r.cfg.Batch {
				full := s.claim(ctx, claims)
				if s.stopping(ctx) {
					return
				}
				if full {
					continue // More may be due.
				}
				want = false
				resetTimer(poll, s.untilNextClaim())
			} else {
				released = r.sem.released
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case _, ok := <-wake:
			if !ok {
				wake = nil
				continue
			}
			want = true
		case <-poll.C:
			want = true
			resetTimer(poll, s.untilNextClaim())
		case <-r.breakers.closed:
			want = true // A probe was delivered: its topic flows again.
		case <-r.settledKeys.signal:
			// Keyed messages were settled: the next of their keys are due.
			want = true
			s.cur.rewind(r.settledKeys.take())
		case <-released:
		}
	}
}

// untilNextClaim returns how long to wait for the next claim when nothing
// wakes the subscriber: the poll interval, or less when a breaker's probe
// is due sooner.
func (s *subscriber) untilNextClaim() time.Duration {
	r := s.r
	d := r.cfg.Interval
	if at, ok := r.breakers.next(); ok {
		d = min(d, max(at.Sub(r.now()), time.Millisecond))
	}
	return d
}

func (s *subscriber) stopping(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-s.closing:
		return true
	default:
		return false
	}
}

// claim claims a batch and queues it to be handed over. It reports whether
// more may be due.
func (s *subscriber) claim(ctx context.Context, claims chan<- *claim) bool {
	r := s.r
	n := r.sem.tryAcquire(r.cfg.Batch)
	// The handlers of one claim share one deadline, counted from before the
	// claim, so that a slow claim shortens their time rather than the
	// lease's room for settling.
	deadline := time.Now().Add(r.cfg.Timeout)
	c, full, _ := r.claim(ctx, n, &s.cur)
	if len(c.msgs) == 0 {
		return full
	}
	hctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	c.cancel, c.ctx = cancel, hctx
	if s.cut != nil {
		stop := context.AfterFunc(s.cut, cancel)
		c.cancel = func() { stop(); cancel() }
		c.cut = s.cut
	}
	// The semaphore bounds the claims in flight, so this never waits long.
	claims <- c
	return full
}

// handOver hands the messages of each claim to the router, in order. Once
// the subscriber stops, what is not handed over yet is released.
func (s *subscriber) handOver(ctx context.Context, claims <-chan *claim, out chan<- *message.Message) {
	r := s.r
	for c := range claims {
		for i, h := range c.msgs {
			if !s.stopping(ctx) {
				select {
				case out <- r.toWatermill(h, c.ctx):
					continue
				case <-ctx.Done():
				case <-s.closing:
				}
			}
			r.release(ctx, c.msgs[i:])
			break
		}
	}
}

// resetTimer makes t fire after d, whether or not it has fired.
func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	select {
	case <-t.C:
	default:
	}
	t.Reset(d)
}
