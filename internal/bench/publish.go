package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/integration"
)

// Publishing is what the publish benchmark sends integration events
// through: the messages each event becomes, and the relay's handlers and
// options for their topics.
type Publishing struct {
	Events   publish.Events
	Handlers map[string]outbox.Handler
	Options  []relay.Option
}

// Publish fills the outbox with n [integration.SignedIn] events about
// users users, in turn, for each destination of p, then times a relay with
// [Bench.Relay], publishing through p's handlers, until every message is
// published and acknowledged. Each user's events go out one at a time, in
// order, so fewer users mean less parallelism.
func (b Bench) Publish(ctx context.Context, p Publishing, n, users int) error {
	if !p.Events.Enabled() {
		return errors.New("bench publish: no destination: set BROKER_URL, or WEBHOOK_URL and WEBHOOK_SECRET")
	}
	ids := make([]uuid.UUID, users)
	for i := range ids {
		ids[i] = uuid.New()
	}
	const perTx = 1000
	total := 0
	for start := 0; start < n; start += perTx {
		err := b.Runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			var msgs []outbox.Message
			for i := start; i < min(start+perTx, n); i++ {
				id := ids[i%users]
				m, err := p.Events.Messages(integration.TypeSignedIn, id.String(),
					integration.SignedIn{UserID: id, Version: int64(i/users + 1)}, tx.Now())
				if err != nil {
					return err
				}
				msgs = append(msgs, m...)
			}
			total += len(msgs)
			return b.Outbox.Add(ctx, tx, msgs...)
		})
		if err != nil {
			return fmt.Errorf("bench publish: fill: %w", err)
		}
	}
	var published, failed atomic.Int64
	done := make(chan struct{})
	handlers := make(map[string]outbox.Handler, len(p.Handlers))
	for topic, h := range p.Handlers {
		handlers[topic] = func(ctx context.Context, m outbox.Message) error {
			if err := h(ctx, m); err != nil {
				if failed.Add(1) == 1 {
					b.log().Warn("bench publish: a publish failed; the relay retries it", "error", err)
				}
				return err
			}
			if published.Add(1) == int64(total) {
				close(done)
			}
			return nil
		}
	}
	relay, err := relay.New(b.Outbox, handlers, b.Relay, append([]relay.Option{relay.WithTracerProvider(b.TracerProvider)}, p.Options...)...)
	if err != nil {
		return err
	}
	defer relay.Close()
	elapsed, err := b.runUntilDone(ctx, "bench publish", relay, done, &published, total)
	if cut := (*CutShortError)(nil); errors.As(err, &cut) {
		fmt.Fprintf(b.Out, "publish: %d messages in %.2fs, %.0f msgs/s (cut short: %d of %d)\n",
			cut.Done, elapsed.Seconds(), float64(cut.Done)/elapsed.Seconds(), cut.Done, total)
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(b.Out, "destinations: %v, %d events about %d users, %d failed publishes retried\n",
		p.Events.Destinations, n, users, failed.Load())
	fmt.Fprintf(b.Out, "publish: %d messages in %.2fs, %.0f msgs/s\n", total, elapsed.Seconds(), float64(total)/elapsed.Seconds())
	return nil
}
