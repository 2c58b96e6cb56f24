package outbox

import (
	"context"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
)

// subscriber is the Watermill [message.Subscriber] of a [Relay]: it claims
// batches of due messages from the store and hands them to the router.
//
// It claims again at once after a full batch, when the store wakes it (a
// commit added messages), or after [RelayConfig.Interval]. It waits for every
// message of a batch to be settled by the router's handler before it
// acknowledges the delivered ones in one store call and claims the next
// batch, so it never holds more than one batch and never holds a database
// transaction while a handler runs.
type subscriber struct {
	r       *Relay
	closing chan struct{}
	once    sync.Once
	loops   sync.WaitGroup
}

var _ message.Subscriber = (*subscriber)(nil)

func newSubscriber(r *Relay) *subscriber {
	return &subscriber{r: r, closing: make(chan struct{})}
}

// Subscribe starts claiming. The topic is the relay's own; every outbox
// topic arrives on the returned channel, which is closed once the
// subscriber stops and its last batch is settled.
func (s *subscriber) Subscribe(ctx context.Context, _ string) (<-chan *message.Message, error) {
	out := make(chan *message.Message)
	ctx, cancel := context.WithCancel(ctx)
	var wake <-chan struct{}
	if w, ok := s.r.store.(Waker); ok {
		wake = w.Wakeups(ctx)
	}
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		defer close(out)
		s.loop(ctx, out, wake)
		cancel()
		// The listener has stopped once its channel is closed.
		for range wake {
		}
	}()
	return out, nil
}

// Close stops claiming and waits until the batch in flight is settled.
func (s *subscriber) Close() error {
	s.once.Do(func() { close(s.closing) })
	s.loops.Wait()
	return nil
}

func (s *subscriber) loop(ctx context.Context, out chan<- *message.Message, wake <-chan struct{}) {
	r := s.r
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		default:
		}
		claimed := r.now()
		msgs, err := r.store.Claim(ctx, claimed, r.cfg.Lease, r.cfg.Batch)
		if err != nil && ctx.Err() == nil {
			r.log.ErrorContext(ctx, "outbox: claim", "error", err)
		}
		if len(msgs) > 0 {
			s.deliver(ctx, out, msgs, claimed.Add(r.cfg.Lease))
		}
		if len(msgs) == r.cfg.Batch {
			continue // More may be due.
		}
		poll.Reset(r.cfg.Interval)
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-wake:
		case <-poll.C:
		}
		if !poll.Stop() {
			select {
			case <-poll.C:
			default:
			}
		}
	}
}

// deliver hands msgs to the router, waits until each is acked or nacked,
// and acknowledges the delivered ones in the store. When ctx ends before all
// are handed over, the rest are released.
func (s *subscriber) deliver(ctx context.Context, out chan<- *message.Message, msgs []Message, leaseEnd time.Time) {
	// Deliveries outlive a shutdown: each is bounded by the relay's timeout.
	msgCtx := context.WithoutCancel(ctx)
	sent := make([]*message.Message, 0, len(msgs))
	for i, m := range msgs {
		wm := toWatermill(m, leaseEnd)
		wm.SetContext(msgCtx)
		select {
		case out <- wm:
			sent = append(sent, wm)
			continue
		case <-ctx.Done():
			s.r.release(ctx, msgs[i:])
		}
		break
	}
	delivered := make([]uuid.UUID, 0, len(sent))
	for _, wm := range sent {
		select {
		case <-wm.Acked():
			if wm.Metadata.Get(metadataOutcome) == outcomeDelivered {
				delivered = append(delivered, uuid.MustParse(wm.UUID))
			}
		case <-wm.Nacked():
		}
	}
	if err := s.r.ack(ctx, delivered); err != nil {
		s.r.log.ErrorContext(ctx, "outbox: ack", "messages", len(delivered), "error", err)
	}
}
