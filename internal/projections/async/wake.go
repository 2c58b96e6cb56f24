package async

import (
	"context"
	"errors"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v3/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
)

// The reads after a wake-up: the first after firstEager, then twice as
// long each time nothing is found, until the wait passes lastEager and
// the subscriber goes back to its poll interval.
const (
	firstEager = 5 * time.Millisecond
	lastEager  = time.Second
)

// WakeBackoff returns the backoff of a watermill-sql subscriber that
// reads the log again as soon as a commit of this process wakes it: after
// a read that found nothing, it waits for wake, or for poll to pass (for
// commits of other processes), or for done. After an error it waits
// retry. Waiting inside the backoff, rather than returning how long to
// sleep, is what lets a wake-up cut the wait short; done must end when the
// subscriber stops, or its Close waits for the poll.
//
// A read right after a wake-up can find nothing yet: on PostgreSQL an
// event is delivered only once every transaction older than its own has
// ended, and the commit that woke the subscriber may have overtaken one
// that is still open. So after a wake-up, or a read that found events, the
// subscriber reads again soon and then less and less often, up to a second
// after the last find, before it waits for its poll interval again.
func WakeBackoff(wake <-chan struct{}, poll, retry time.Duration, done <-chan struct{}) wsql.BackoffManager {
	return &wakeBackoff{wake: wake, poll: poll, retry: retry, done: done}
}

// wakeBackoff is called by its subscriber's one reading goroutine.
type wakeBackoff struct {
	wake        <-chan struct{}
	poll, retry time.Duration
	done        <-chan struct{}
	// eager is the next wait after a read that found nothing, while the
	// subscriber reads eagerly; zero once it waits for its poll again.
	eager time.Duration
}

func (b *wakeBackoff) HandleError(logger watermill.LoggerAdapter, noMsg bool, err error) time.Duration {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return 0 // The subscriber is stopping.
		}
		logger.Error("Error querying for message", err, watermill.LogFields{"wait_time": b.retry})
		return b.retry
	}
	if !noMsg {
		b.eager = firstEager
		return 0
	}
	wait := b.poll
	if b.eager > 0 {
		wait = min(b.eager, b.poll)
		if b.eager *= 2; b.eager > lastEager {
			b.eager = 0
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-b.wake:
		b.eager = firstEager
	case <-t.C:
	case <-b.done:
	}
	return 0
}

// StopWakeups returns sub, which stops its wake-ups with stop when it is
// closed or when the context it subscribed with ends, so that its backoff
// ([WakeBackoff]) no longer holds it.
func StopWakeups(sub message.Subscriber, stop context.CancelFunc) message.Subscriber {
	return wakingSubscriber{Subscriber: sub, stop: stop}
}

type wakingSubscriber struct {
	message.Subscriber
	stop context.CancelFunc
}

func (s wakingSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	context.AfterFunc(ctx, s.stop)
	return s.Subscriber.Subscribe(ctx, topic)
}

func (s wakingSubscriber) Close() error {
	s.stop()
	return s.Subscriber.Close()
}
