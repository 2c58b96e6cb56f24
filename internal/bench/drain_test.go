package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
)

// A benchmark that Ctrl-C or --timeout ends early still reports what it
// did, and says it was cut short.
func TestBenchmarkCutShortSaysSo(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	store := db.Outbox()
	if err := db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var msgs []outbox.Message
		for i := range 3 {
			m, err := outbox.NewMessage(Topic, map[string]int{"seq": i}, tx.Now())
			if err != nil {
				return err
			}
			msgs = append(msgs, m)
		}
		return store.Add(ctx, tx, msgs...)
	}); err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	second, release := make(chan struct{}), make(chan struct{})
	relay, err := relay.New(store, map[string]outbox.Handler{Topic: func(ctx context.Context, m outbox.Message) error {
		if n := seen.Add(1); n > 1 {
			if n == 2 {
				close(second)
			}
			<-release // The rest hang until the run is cut short.
		}
		return nil
	}}, outbox.RelayConfig{Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-second
		cancel()
		close(release)
	}()
	elapsed, err := Bench{Outbox: store}.runUntilDone(ctx, "bench drain", relay, make(chan struct{}), &seen, 3)
	var cut *CutShortError
	if !errors.As(err, &cut) || !errors.Is(err, context.Canceled) || cut.Of != 3 || cut.Done < 1 || elapsed <= 0 {
		t.Fatalf("cut short: %v (%+v) after %s, want a CutShortError with the count so far", err, cut, elapsed)
	}
}
