package relay_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// claimSpy is a store that reports how many messages each claim returned.
type claimSpy struct {
	*postgres.Outbox
	claims chan int
}

func (s *claimSpy) ClaimWithOrigins(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]outbox.Claimed, error) {
	msgs, err := s.Outbox.ClaimWithOrigins(ctx, now, lease, limit)
	s.claims <- len(msgs)
	return msgs, err
}

// heldClaim is a store whose first claim waits until release is closed.
type heldClaim struct {
	*postgres.Outbox
	once    sync.Once
	holding chan struct{}
	release chan struct{}
}

func (s *heldClaim) ClaimWithOrigins(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]outbox.Claimed, error) {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.holding)
		<-s.release
	}
	return s.Outbox.ClaimWithOrigins(ctx, now, lease, limit)
}

// TestRelayClaim checks when Run claims: at a commit, while another claim
// runs, and behind its cursor.
func TestRelayClaim(t *testing.T) {
	t.Run("wakes on commit", testRelayWakesOnCommit)
	t.Run("claims a commit while another claim runs", testRelayClaimsACommitWhileAnotherClaimRuns)
	t.Run("delivers a message committed behind its cursor", testRelayDeliversAMessageCommittedBehindItsCursor)
	t.Run("claims again within seconds after a failed claim", testRelayClaimsAgainWithinSecondsAfterAFailedClaim)
}

// unwoken is a store whose relay is never woken by a commit: only its poll
// or its own retry makes it claim.
type unwoken struct{ outbox.RelayStore }

func (unwoken) Wakeups(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ch) })
	return ch
}

// A relay whose claim failed (the database went away) is not ready, and
// tries again after a backoff of its own, one second doubling, however
// long its poll interval: once the database is back it claims, delivers
// and is ready again without waiting an hour for its poll. The test waits
// for the relay's retry timer on a signal of its own.
func testRelayClaimsAgainWithinSecondsAfterAFailedClaim(t *testing.T) {
	t.Parallel()
	db, proxy := pgtest.NewBehindProxy(t)
	store := unwoken{db.Outbox()}
	rec := newRecorder(1)
	rel, err := relay.New(store, map[string]outbox.Handler{"mail": rec.handle},
		outbox.RelayConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	waits := make(chan time.Duration, 10)
	fire := make(chan time.Time)
	relay.SetClaimRetry(rel, func(d time.Duration) <-chan time.Time {
		waits <- d
		return fire
	})
	addNow(t, db, store)
	proxy.Down()
	cancel, done := runRelay(t, rel)
	defer stopRelay(t, cancel, done)
	for _, want := range []time.Duration{time.Second, 2 * time.Second} {
		select {
		case got := <-waits:
			if got != want {
				t.Errorf("the relay waits %s to claim again, want %s", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the relay did not set a retry of its failed claim (want one in %s)", want)
		}
		if err := rel.Ready(); !errors.Is(err, relay.ErrCannotClaim) {
			t.Fatalf("Ready after a failed claim = %v, want ErrCannotClaim", err)
		}
		if want == 2*time.Second {
			proxy.Up()
		}
		fire <- time.Now()
	}
	rec.wait(t)
	if err := rel.Ready(); err != nil {
		t.Errorf("Ready once a claim succeeded = %v, want nil", err)
	}
	select {
	case d := <-waits:
		t.Errorf("the relay set another retry (%s) after a claim succeeded", d)
	default:
	}
}

// A relay that polls once an hour still delivers at once: the commit of an
// Add wakes it. The message has a key, so that the relay claims it rather
// than taking it from the handover.
func testRelayWakesOnCommit(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	spy := &claimSpy{Outbox: db.Outbox().(*postgres.Outbox), claims: make(chan int, 1000)}
	rec := newRecorder(1)
	rel, err := relay.New(spy, map[string]outbox.Handler{"mail": rec.handle},
		outbox.RelayConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runRelay(t, rel)
	// The relay claims once at start and once more when its listener
	// connects. After that only a wake-up can make it claim within the
	// test's deadline.
	for range 2 {
		select {
		case <-spy.claims:
		case <-time.After(30 * time.Second):
			t.Fatal("the relay did not claim at start")
		}
	}
	commitKeyed(t, db.Runner(nil), spy, "ada")
	rec.wait(t)
	stopRelay(t, cancel, done)
}

// A message committed while a claim is under way does not wait for that
// claim's end: a second claim takes it. Here the first claim waits until
// the message is delivered. The message has a key, so that the relay claims
// it rather than taking it from the handover.
func testRelayClaimsACommitWhileAnotherClaimRuns(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store := &heldClaim{Outbox: db.Outbox().(*postgres.Outbox), holding: make(chan struct{}), release: make(chan struct{})}
	released := sync.OnceFunc(func() { close(store.release) })
	t.Cleanup(released)
	rec := newRecorder(1)
	rel, err := relay.New(store, map[string]outbox.Handler{"mail": rec.handle},
		outbox.RelayConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runRelay(t, rel)
	select {
	case <-store.holding:
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not claim at start")
	}
	commitKeyed(t, db.Runner(nil), store, "ada")
	rec.wait(t)
	released()
	stopRelay(t, cancel, done)
}

// While a backlog is drained, each claim starts where the previous one
// found its earliest message. A message that becomes due before that point,
// committed late by a transaction that began long ago, is still delivered
// in the same pass.
func testRelayDeliversAMessageCommittedBehindItsCursor(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			f := newFixtureOn(t, b, outbox.RelayConfig{Batch: 5})
			late, err := outbox.NewMessage("mail", "late", epoch.Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			f.handle = func(ctx context.Context, _ outbox.Message) error {
				var err error
				once.Do(func() {
					err = f.runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error { return f.store.Add(ctx, tx, late) })
				})
				return err
			}
			for range 20 {
				f.add(t, "mail")
			}
			if got := f.drain(t); got.Delivered != 21 {
				t.Fatalf("drain: %+v, want all 21 delivered", got)
			}
			if _, err := f.store.Lookup(t.Context(), late.ID); !errors.Is(err, outbox.ErrNotFound) {
				t.Errorf("the late message: %v, want delivered", err)
			}
		})
	}
}
