package sqlite_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
)

// The relay's synchronous pass over the SQLite outbox, with a clock that
// stands still until the test moves it: a message that fails twice is
// retried after its backoff and then delivered, once.
func TestRelayRetriesUntilDelivered(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	store, runner := db.Outbox(), db.Runner(clock)
	var calls []int
	var delivered []uuid.UUID
	rel, err := relay.New(store, map[string]outbox.Handler{
		"mail": func(_ context.Context, m outbox.Message) error {
			calls = append(calls, m.Attempts)
			if len(calls) < 3 {
				return errors.New("smtp: connection refused")
			}
			delivered = append(delivered, m.ID)
			return nil
		},
	}, outbox.RelayConfig{MaxAttempts: 3}, relay.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	m, err := outbox.NewMessage("mail", map[string]string{"to": "ada@example.com"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error { return store.Add(ctx, tx, m) }); err != nil {
		t.Fatal(err)
	}
	drain := func(want relay.DrainStats) {
		t.Helper()
		got, err := rel.Drain(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("Drain at %s = %+v, want %+v", now.Format(time.RFC3339), got, want)
		}
	}

	drain(relay.DrainStats{Claimed: 1, Retried: 1}) // fails, retry in 1s
	rec, err := store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LastError != "smtp: connection refused" || !rec.DueAt.Equal(now.Add(outbox.Backoff(1))) {
		t.Errorf("after the first failure: LastError %q, DueAt %v; want the reason and %v",
			rec.LastError, rec.DueAt, now.Add(outbox.Backoff(1)))
	}
	drain(relay.DrainStats{}) // not due yet
	now = now.Add(outbox.Backoff(1))
	drain(relay.DrainStats{Claimed: 1, Retried: 1}) // fails, retry in 2s
	now = now.Add(outbox.Backoff(2))
	drain(relay.DrainStats{Claimed: 1, Delivered: 1}) // succeeds
	now = now.Add(time.Hour)
	drain(relay.DrainStats{}) // nothing left

	if !slices.Equal(calls, []int{1, 2, 3}) {
		t.Errorf("handler saw attempts %v, want [1 2 3]", calls)
	}
	if !slices.Equal(delivered, []uuid.UUID{m.ID}) {
		t.Errorf("delivered %v, want exactly %s", delivered, m.ID)
	}
	if _, err := store.Lookup(t.Context(), m.ID); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Lookup of the delivered message: %v, want ErrNotFound", err)
	}
}

// claimSpy is a store that reports each claim.
type claimSpy struct {
	*sqlite.Outbox
	claims chan int
}

func (s *claimSpy) ClaimWithOrigins(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]outbox.Claimed, error) {
	msgs, err := s.Outbox.ClaimWithOrigins(ctx, now, lease, limit)
	select {
	case s.claims <- len(msgs):
	default:
	}
	return msgs, err
}

// TestRelay runs the relay on SQLite: a commit wakes it, and relays sharing a file never deliver a message twice.
func TestRelay(t *testing.T) {
	t.Parallel()
	t.Run("WakesOnCommit", testRelayWakesOnCommit)
	t.Run("RelaysOnOneDatabaseNeverDeliverAMessageTwice", testRelaysOnOneDatabaseNeverDeliverAMessageTwice)
}

// A running relay that polls once an hour still delivers a message committed
// after it started, at once: the commit wakes it in this process.
func testRelayWakesOnCommit(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	spy := &claimSpy{Outbox: db.Outbox().(*sqlite.Outbox), claims: make(chan int, 1000)}
	delivered := make(chan uuid.UUID, 10)
	rel, err := relay.New(spy, map[string]outbox.Handler{
		"mail": func(_ context.Context, m outbox.Message) error {
			delivered <- m.ID
			return nil
		},
	}, outbox.RelayConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- rel.Run(ctx) }()
	// The relay subscribes to wake-ups and then claims once at start; after
	// that only a wake-up can make it claim within the test's deadline.
	select {
	case n := <-spy.claims:
		if n != 0 {
			t.Fatalf("the first claim got %d messages from an empty outbox", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not claim at start")
	}
	var m outbox.Message
	err = db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var err error
		if m, err = outbox.NewMessage("mail", "hi", tx.Now()); err != nil {
			return err
		}
		return db.Outbox().Add(ctx, tx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-delivered:
		if id != m.ID {
			t.Errorf("delivered %s, want %s", id, m.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the message committed after the relay started was not delivered; the relay polls once an hour")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Run acknowledged the delivery before it returned.
	if _, err := db.Outbox().Lookup(t.Context(), m.ID); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Lookup of the delivered message: %v, want ErrNotFound", err)
	}
}

// Relays that share one database, each on an Outbox of its own, never
// deliver a message twice.
func testRelaysOnOneDatabaseNeverDeliverAMessageTwice(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	runner := db.Runner(nil)
	const n = 600
	var mu sync.Mutex
	count := make(map[uuid.UUID]int, n)
	all := make(chan struct{})
	handle := func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		count[m.ID]++
		if len(count) == n && count[m.ID] == 1 {
			close(all)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 3 {
		rel, err := relay.New(db.Outbox(), map[string]outbox.Handler{"mail": handle},
			outbox.RelayConfig{Batch: 7, Interval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer rel.Close()
		wg.Go(func() {
			if err := rel.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	for i := 0; i < n; i += 50 {
		err := runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			msgs := make([]outbox.Message, 50)
			for j := range msgs {
				m, err := outbox.NewMessage("mail", map[string]int{"n": i + j}, tx.Now())
				if err != nil {
					return err
				}
				msgs[j] = m
			}
			return db.Outbox().Add(ctx, tx, msgs...)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		mu.Lock()
		t.Errorf("delivered %d of %d messages", len(count), n)
		mu.Unlock()
	}
	cancel()
	wg.Wait()
	for id, c := range count {
		if c != 1 {
			t.Errorf("message %s delivered %d times", id, c)
		}
	}
	if n := claimable(t, db.Outbox()); n != 0 {
		t.Errorf("%d delivered messages were not acknowledged", n)
	}
}
