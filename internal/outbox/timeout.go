package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// enforceTimeout bounds each call of a handler by d. The handler's context
// ends after d, and the call returns an error at d even when the handler
// ignores its context, so that one hung handler cannot hold its batch, the
// relay's shutdown or its lease. Such a handler keeps running in its own
// goroutine on a copy of the message until it returns, and what it returns
// is discarded.
//
// Watermill's middleware.Timeout only ends the context; this one also stops
// waiting.
func enforceTimeout(d time.Duration) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			ctx, cancel := context.WithTimeout(msg.Context(), d)
			defer cancel()
			// The handler gets a copy, so that an abandoned call never
			// touches the message the relay goes on to settle.
			own := msg.Copy()
			own.SetContext(ctx)
			type result struct {
				msgs []*message.Message
				err  error
			}
			done := make(chan result, 1)
			go func() {
				msgs, err := h(own)
				done <- result{msgs, err}
			}()
			select {
			case r := <-done:
				return r.msgs, r.err
			case <-ctx.Done():
				return nil, fmt.Errorf("handler did not return within %s: %w", d, ctx.Err())
			}
		}
	}
}
