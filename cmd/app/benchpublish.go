package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// benchPublish fills the outbox with n user.signed_in events about users
// users, in turn, for each configured destination, then times a relay with
// cfg, publishing through the configured publishers, until every message
// is published and acknowledged. Each user's events go out one at a time,
// in order, so fewer users mean less parallelism.
func benchPublish(ctx context.Context, e env, db backend, cfg outbox.RelayConfig, n, publishUsers int, timed func(func() int64) func(), stdout io.Writer) error {
	events := e.integrationEvents()
	if !events.Enabled() {
		return errors.New("bench publish: no destination: set BROKER_URL, or WEBHOOK_URL and WEBHOOK_SECRET")
	}
	users := make([]uuid.UUID, publishUsers)
	for i := range users {
		users[i] = uuid.New()
	}
	store, runner := db.Outbox(), db.Runner(nil)
	const perTx = 1000
	total := 0
	for start := 0; start < n; start += perTx {
		err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			var msgs []outbox.Message
			for i := start; i < min(start+perTx, n); i++ {
				id := users[i%publishUsers]
				m, err := events.Messages(user.EventSignedIn, id.String(),
					user.SignedInData{UserID: id, Version: int64(i/publishUsers + 1)}, tx.Now())
				if err != nil {
					return err
				}
				msgs = append(msgs, m...)
			}
			total += len(msgs)
			return store.Add(ctx, tx, msgs...)
		})
		if err != nil {
			return fmt.Errorf("bench publish: fill: %w", err)
		}
	}
	pubs, err := e.publishers()
	if err != nil {
		return err
	}
	defer pubs.Close()
	var published, failed atomic.Int64
	done := make(chan struct{})
	handlers := make(map[string]outbox.Handler, len(pubs.handlers))
	for topic, h := range pubs.handlers {
		handlers[topic] = func(ctx context.Context, m outbox.Message) error {
			if err := h(ctx, m); err != nil {
				if failed.Add(1) == 1 {
					e.log.Warn("bench publish: a publish failed; the relay retries it", "error", err)
				}
				return err
			}
			if published.Add(1) == int64(total) {
				close(done)
			}
			return nil
		}
	}
	relay, err := outbox.NewRelay(store, handlers, cfg,
		e.publishPolicy(pubs))
	if err != nil {
		return err
	}
	defer relay.Close()
	elapsed, err := runUntilDone(ctx, "bench publish", store, relay, done, &published, total, timed)
	if cut := (*cutShortError)(nil); errors.As(err, &cut) {
		fmt.Fprintf(stdout, "publish: %d messages in %.2fs, %.0f msgs/s (cut short: %d of %d)\n",
			cut.done, elapsed.Seconds(), float64(cut.done)/elapsed.Seconds(), cut.done, total)
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "destinations: %v, %d events about %d users, %d failed publishes retried\n",
		events.Destinations, n, publishUsers, failed.Load())
	fmt.Fprintf(stdout, "publish: %d messages in %.2fs, %.0f msgs/s\n", total, elapsed.Seconds(), float64(total)/elapsed.Seconds())
	return nil
}
