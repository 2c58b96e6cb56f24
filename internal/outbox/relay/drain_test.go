package relay_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// TestDrain checks the relay's synchronous pass: where it stops, what it releases, and that the tightest valid lease still delivers.
func TestDrain(t *testing.T) {
	t.Run("stops between messages and releases the rest", testDrainStopsBetweenMessagesAndReleasesTheRest)
	t.Run("with a tight lease delivers and ends", testDrainWithATightLeaseDeliversAndEnds)
	t.Run("with the tightest valid lease delivers", testDrainWithTheTightestValidLeaseDelivers)
	t.Run("released messages are not buried untried", testReleasedMessagesAreNotBuriedUntried)
}

// Stopping a drain lets the delivery in flight finish and releases the rest
// of the batch, due again at once rather than when the lease ends.
func testDrainStopsBetweenMessagesAndReleasesTheRest(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	var seen []uuid.UUID
	f.handle = func(ctx context.Context, m outbox.Message) error {
		seen = append(seen, m.ID)
		cancel() // An operator presses Ctrl-C during the first delivery.
		return ctx.Err()
	}
	first, second, third := f.add(t, "mail"), f.add(t, "mail"), f.add(t, "mail")
	stats, err := f.relay.Drain(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Drain after its context ended: %v, want context.Canceled", err)
	}
	if stats.Claimed != 3 || stats.Delivered != 1 || !slices.Equal(seen, []uuid.UUID{first.ID}) {
		t.Fatalf("stats %+v, handler saw %v; want the first delivered, its context not cancelled", stats, seen)
	}
	for _, m := range []outbox.Message{second, third} {
		rec, err := f.store.Lookup(t.Context(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.DueAt.Equal(f.now) {
			t.Errorf("message %s due at %v, want released at %v", m.ID, rec.DueAt, f.now)
		}
	}
}

// A lease only a little longer than the timeout still delivers: each
// delivery starts while the lease has a timeout's worth left, and the pass
// ends rather than claiming back what it released.
func testDrainWithATightLeaseDeliversAndEnds(t *testing.T) {
	f := newFixtureWith(t, outbox.RelayConfig{Lease: 41 * time.Second, Timeout: 30 * time.Second, Batch: 2})
	calls := 0
	f.handle = func(context.Context, outbox.Message) error {
		calls++
		f.now = f.now.Add(2 * time.Second) // Each delivery takes two seconds.
		return nil
	}
	for range 3 {
		f.add(t, "mail")
	}
	stats := f.drain(t)
	if stats.Delivered != 1 || stats.Claimed != 2 || calls != 1 {
		t.Fatalf("first pass: %+v after %d calls; want one delivered and the other released", stats, calls)
	}
	stats = f.drain(t)
	if stats.Delivered != 1 || calls != 2 {
		t.Fatalf("second pass: %+v after %d calls; want the released message delivered", stats, calls)
	}
	f.drain(t)
	if calls != 3 {
		t.Errorf("after three passes the handler ran %d times, want 3", calls)
	}
}

// The tightest lease Validate accepts is Timeout+SettleTimeout. On the
// real clock, time passes between a claim's now and the check before its
// first delivery, and the first delivery of each claim still starts: a
// valid config always delivers, rather than releasing every message
// untried and spending an attempt each pass.
func testDrainWithTheTightestValidLeaseDelivers(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := db.Outbox()
	cfg := outbox.RelayConfig{Timeout: 30 * time.Second, Lease: 30*time.Second + outbox.SettleTimeout}
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Fatalf("the config under test is not valid: %v", err)
	}
	var calls atomic.Int32
	rel, err := relay.New(store, map[string]outbox.Handler{
		"mail": func(context.Context, outbox.Message) error { calls.Add(1); return nil },
	}, cfg) // The real clock, as `app outbox drain` runs it.
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	m := addAt(t, db, store, "mail", time.Now())
	var last relay.DrainStats
	for range 3 {
		if last, err = rel.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if calls.Load() > 0 {
			break
		}
	}
	if calls.Load() != 1 {
		rec, _ := store.Lookup(t.Context(), m.ID)
		t.Errorf("three passes with Lease = Timeout+SettleTimeout never ran the handler (last pass %+v); "+
			"the message has spent %d attempts untried, last error %q", last, rec.Attempts, rec.LastError)
	}
}

// A message that the relay claims and releases untried (a drain stopped
// after its first delivery, a relay stopped while handing a batch over)
// gets back the attempt its claim counted, so that however often that
// happens it is never buried as claimed too often before its handler ran.
func testReleasedMessagesAreNotBuriedUntried(t *testing.T) {
	f := newFixture(t) // MaxAttempts 3
	var mu sync.Mutex
	seen := map[uuid.UUID]int{}
	var stop context.CancelFunc
	f.handle = func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		seen[m.ID]++
		mu.Unlock()
		if stop != nil {
			stop() // An operator presses Ctrl-C during the first delivery.
		}
		return nil
	}
	var msgs []outbox.Message
	for range 4 {
		msgs = append(msgs, f.add(t, "mail"))
	}
	for range 3 {
		ctx, cancel := context.WithCancel(t.Context())
		stop = cancel
		if _, err := f.relay.Drain(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted drain: %v", err)
		}
		cancel()
	}
	stop = nil
	stats := f.drain(t)
	last := msgs[3]
	if seen[last.ID] != 1 || stats.Buried != 0 {
		rec, _ := f.store.Lookup(t.Context(), last.ID)
		t.Errorf("after three interrupted drains, the last pass %+v; handler ran %d times for %s, which is now %+v: "+
			"a message buried without ever being handed to its handler", stats, seen[last.ID], last.ID, rec)
	}
}
