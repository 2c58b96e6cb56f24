package relay

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// subscriber is the Watermill [message.Subscriber] of a [Relay]: it claims
// batches of due messages from the store and hands each out on the channel
// of its topic's Subscribe, for the router's handler of that topic, and
// settles each on its Ack or Nack: an ack is acknowledged in a batch with
// the others, a nack retried after [outbox.Backoff] or buried as the topic's
// [RetryPolicy] says. A message claimed too often is buried without being
// handed out.
//
// It claims whenever the relay's semaphore has a batch's worth of free slots:
// at once after a full batch, when the store wakes it (a commit added
// messages), when keyed messages were settled (the next of their keys are
// due), when a breaker's probe is due, or after
// [outbox.RelayConfig.Interval]; up to two claims at once (see loop). A claim
// that failed (the database went away, or restarted and cut the pool's
// connections) is tried again after a backoff of its own, from one second to
// [claimRetryCeiling], whatever the interval: the relay, and with it the
// instance's readiness, comes back within seconds of the database. Since the
// semaphore holds [HeldBatches] batches, it claims the next batches while the
// previous ones are delivered and acknowledged. It never holds a database
// transaction while a handler runs.
//
// One claiming loop serves every topic, unlike most Watermill subscribers,
// since a claim takes the due messages of all topics in one statement.
type subscriber struct {
	r    *Relay
	acks *acker
	cur  cursor
	// closing is closed by Close.
	closing chan struct{}
	// cut, when not nil, ends the handlers' contexts once a stop's grace
	// has run out.
	cut   context.Context
	once  sync.Once
	loops sync.WaitGroup

	// base is the context of the run, under which the handlers' contexts
	// are made.
	base context.Context
	// backlog is set while claims come back full, and until the first
	// claim comes back short: the relay then takes nothing from the
	// [outbox.Handover], so that what is due goes first.
	backlog atomic.Bool
	// takenQueue holds the claims of messages taken from the [outbox.Handover]
	// until handOut hands them out; takenReady signals one, and
	// takenClosed is set once handOut has stopped.
	takenMu     sync.Mutex
	takenQueue  []*claim
	takenReady  chan struct{}
	takenClosed bool

	mu     sync.Mutex
	topics map[string]*subscription
	// ready is closed once every topic of start has subscribed, or the
	// subscriber stops.
	ready  chan struct{}
	expect int
}

// subscription is the channel of one Subscribe.
type subscription struct {
	out chan *message.Message
	// done is closed when the Subscribe's context ends or the subscriber
	// closes; out is closed after it, once no hand-out is sending.
	done   chan struct{}
	sendMu sync.Mutex
	closed bool
}

var _ message.Subscriber = (*subscriber)(nil)

func newSubscriber(r *Relay, acks *acker) *subscriber {
	s := &subscriber{
		r: r, acks: acks, closing: make(chan struct{}), takenReady: make(chan struct{}, 1),
		topics: make(map[string]*subscription), ready: make(chan struct{}),
	}
	s.backlog.Store(true)
	return s
}

// start starts claiming, until ctx ends or Close is called, and hands the
// messages of topics out once each of them has subscribed.
func (s *subscriber) start(ctx context.Context, topics []string) {
	s.mu.Lock()
	s.expect = len(topics)
	s.checkReady()
	s.mu.Unlock()
	s.base = ctx
	ctx, cancel := context.WithCancel(ctx)
	wake := s.r.store.Wakeups(ctx)
	detach := s.r.store.Handover().Attach(s)
	// One goroutine claims, another hands the claimed messages out, so
	// that the next claim runs while the router takes the last one's.
	claims := make(chan *claim, 4)
	s.loops.Add(2)
	go func() {
		defer s.loops.Done()
		defer close(claims)
		s.loop(ctx, claims, wake)
		detach()
		cancel()
		// The listener has stopped once its channel is closed.
		for range wake {
		}
	}()
	go func() {
		defer s.loops.Done()
		s.handOut(ctx, claims)
	}()
}

// checkReady closes ready once every expected topic has subscribed. The
// caller holds s.mu.
func (s *subscriber) checkReady() {
	if s.expect >= 0 && len(s.topics) >= s.expect {
		select {
		case <-s.ready:
		default:
			close(s.ready)
		}
	}
}

// Subscribe returns the channel on which the messages of topic are handed
// out. It is closed once ctx ends or the subscriber closes.
func (s *subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	sub := &subscription{out: make(chan *message.Message), done: make(chan struct{})}
	s.mu.Lock()
	if _, dup := s.topics[topic]; dup {
		s.mu.Unlock()
		return nil, fmt.Errorf("outbox: topic %q subscribed twice", topic)
	}
	s.topics[topic] = sub
	s.checkReady()
	s.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-s.closing:
		}
		close(sub.done)
		// A hand-out in progress sees done and gives up: out is closed
		// after it, so that the router's handler of topic stops.
		sub.sendMu.Lock()
		sub.closed = true
		close(sub.out)
		sub.sendMu.Unlock()
	}()
	return sub.out, nil
}

// Close stops claiming and waits until the subscriber has handed out or
// released what it claimed. Every channel of Subscribe is closed.
func (s *subscriber) Close() error {
	s.once.Do(func() { close(s.closing) })
	s.loops.Wait()
	return nil
}

// loop claims until ctx ends or the subscriber closes. At most two claims
// run at once, as two relays' claims may: they take different messages.
// The lead claim moves the cursor and claims the breakers' probes. A
// second one starts while the lead runs, from a copy of the cursor and
// without probes: when a commit wakes the subscriber, so that a message
// committed just after the lead's statement began waits for one claim and
// not for two; and when the last claim came back full, so that a backlog
// drains two claims at a time rather than one round trip after another.
func (s *subscriber) loop(ctx context.Context, claims chan<- *claim, wake <-chan struct{}) {
	r := s.r
	poll := time.NewTimer(r.cfg.Interval)
	defer poll.Stop()
	type result struct{ lead, full, failed bool }
	results := make(chan result, 2)
	// failures counts the claims that failed in a row, and retry fires
	// when the next is due.
	failures := 0
	var retry <-chan time.Time
	running, leading := 0, false
	// more is set while claims come back full: a backlog is draining.
	more := false
	// rewind is set when keyed messages were settled while the lead ran:
	// the cursor is taken back once the lead has moved it.
	rewind := false
	// seen is the cursor as the running lead started from it; a second
	// claim starts from a copy of it, since the lead's goroutine writes the
	// cursor.
	var seen cursor
	defer func() {
		for ; running > 0; running-- {
			<-results
		}
	}()
	want := true // Claim once at start.
	for {
		r.inflight.sweep(r.now(), r.reportOverran)
		var released <-chan struct{}
		if want {
			switch {
			case running == 2:
			case r.sem.available() < r.cfg.Batch:
				released = r.sem.released
				// Acknowledgements waiting to be written hold slots.
				s.acks.hurry()
			default:
				lead := !leading
				cur := &s.cur
				if lead {
					seen = s.cur
				} else {
					cp := seen
					cur = &cp
				}
				running++
				leading = leading || lead
				want = more && running < 2
				go func() {
					full, err := s.claim(ctx, claims, cur, lead)
					results <- result{lead, full, err != nil}
				}()
				if want {
					continue
				}
			}
		}
		select {
		case res := <-results:
			running--
			if res.lead {
				leading = false
				if rewind {
					s.cur.rewind(r.settledKeys.take())
					rewind = false
				}
			}
			if s.stopping(ctx) {
				return
			}
			if res.failed {
				failures++
				if retry == nil {
					retry = r.claimRetry(claimRetryAfter(failures))
				}
			} else {
				failures, retry = 0, nil
			}
			more = res.full
			s.backlog.Store(res.full)
			if res.full {
				want = true // More may be due.
			} else if running == 0 {
				resetTimer(poll, s.untilNextClaim())
			}
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
		case <-retry:
			retry = nil
			want = true
		case <-r.breakers.closed:
			want = true // A probe was delivered: its topic flows again.
		case <-r.settledKeys.signal:
			// Keyed messages were settled: the next of their keys are due.
			want = true
			if leading {
				rewind = true
			} else {
				s.cur.rewind(r.settledKeys.take())
			}
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
// more may be due, and the error of a claim that failed.
func (s *subscriber) claim(ctx context.Context, claims chan<- *claim, cur *cursor, probes bool) (bool, error) {
	r := s.r
	n := r.sem.tryAcquire(r.cfg.Batch)
	// The handlers of one claim share one deadline, counted from before the
	// claim, so that a slow claim shortens their time rather than the time
	// the lease leaves to record their outcomes.
	deadline := time.Now().Add(r.cfg.Timeout)
	c, full, err := r.claim(ctx, n, cur, probes)
	if len(c.msgs) == 0 {
		return full, err
	}
	s.arm(c, deadline)
	// The semaphore bounds the claims in flight, so this never waits long.
	claims <- c
	return full, err
}

// arm gives the handlers of c their context: it ends at deadline, once
// every message of c is settled, or once a stop's grace has run out.
func (s *subscriber) arm(c *claim, deadline time.Time) {
	hctx, cancel := context.WithDeadline(context.WithoutCancel(s.base), deadline)
	c.cancel, c.ctx = cancel, hctx
	if s.cut != nil {
		stop := context.AfterFunc(s.cut, cancel)
		c.cancel = func() { stop(); cancel() }
		c.cut = s.cut
	}
}

// handOut hands the messages of each claim, and of each batch taken from
// the [outbox.Handover], out, in order, on the channel of their topic, and
// settles each once it is acked or nacked. Once the subscriber stops, what
// is not handed out yet is released, and what is taken later is released
// by its taker.
func (s *subscriber) handOut(ctx context.Context, claims <-chan *claim) {
	defer func() {
		for _, c := range s.popTaken(true) {
			s.r.release(ctx, c.msgs)
		}
	}()
	for {
		select {
		case c, ok := <-claims:
			if !ok {
				return
			}
			s.handAll(ctx, c)
		case <-s.takenReady:
			for _, c := range s.popTaken(false) {
				s.handAll(ctx, c)
			}
		}
	}
}

// handAll hands the messages of c out, or releases those it cannot.
func (s *subscriber) handAll(ctx context.Context, c *claim) {
	for i, h := range c.msgs {
		if s.stopping(ctx) || !s.handOne(ctx, c, h) {
			s.r.release(ctx, c.msgs[i:])
			return
		}
	}
}

// handOne hands h out, or buries it when no handler may take it, and
// reports whether it did either, or released it; false when the subscriber
// stopped first.
func (s *subscriber) handOne(ctx context.Context, c *claim, h *held) bool {
	r := s.r
	if r.foreign(ctx, h) {
		return true
	}
	if why := r.refusal(h); why != nil {
		r.refuse(h, why)
		return true
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	}
	s.mu.Lock()
	sub := s.topics[h.msg.Topic]
	s.mu.Unlock()
	if sub == nil {
		return false
	}
	wm := toWatermill(h, c.ctx)
	sub.sendMu.Lock()
	defer sub.sendMu.Unlock()
	if sub.closed {
		return false
	}
	select {
	case sub.out <- wm:
	case <-sub.done:
		return false
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	}
	go s.settleOn(wm, h)
	return true
}

// settleOn settles h once the router acks or nacks wm.
func (s *subscriber) settleOn(wm *message.Message, h *held) {
	select {
	case <-wm.Acked():
		s.r.settle(h, wm, false, s.acks.add)
	case <-wm.Nacked():
		s.r.settle(h, wm, true, s.acks.add)
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
