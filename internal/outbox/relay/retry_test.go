package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
)

// TestRetryPolicy checks the topics' own retry policies.
func TestRetryPolicy(t *testing.T) {
	t.Run("of age keeps trying until the age is reached", testRelayRetryPolicyOfAgeKeepsTryingUntilTheAgeIsReached)
	t.Run("is the topic's own", testRelayRetryPolicyIsTheTopicsOwn)
	t.Run("of age buries what keeps crashing", testRelayRetryPolicyOfAgeBuriesWhatKeepsCrashing)
	t.Run("that cannot work is refused", testRelayRefusesARetryPolicyThatCannotWork)
	t.Run("gives a late message its minimum tries", testRelayRetryPolicyGivesALateMessageItsMinimumTries)
}

// A topic whose retry policy is an age keeps trying a failing message at
// the backoff ceiling, long past the relay's MaxAttempts, and buries it
// once it fails after that age.
func testRelayRetryPolicyOfAgeKeepsTryingUntilTheAgeIsReached(t *testing.T) {
	const maxAge = 72 * time.Hour
	f := newFixture(t, relay.WithRetryPolicy(relay.RetryPolicy{MaxAge: maxAge}, "mail")) // MaxAttempts 3
	calls := 0
	f.handle = func(context.Context, outbox.Message) error {
		calls++
		return errors.New("nats: no responders available for request")
	}
	m := f.add(t, "mail")
	for attempt := 1; f.now.Sub(m.CreatedAt) < maxAge; attempt++ {
		if got := f.drain(t); got != (relay.DrainStats{Claimed: 1, Retried: 1}) {
			t.Fatalf("attempt %d at +%s: %+v, want one retry", attempt, f.now.Sub(epoch), got)
		}
		f.now = f.now.Add(outbox.Backoff(attempt))
	}
	if calls < 800 {
		t.Errorf("tried %d times in %s, want one try per backoff ceiling", calls, maxAge)
	}
	if got := f.drain(t); got != (relay.DrainStats{Claimed: 1, Buried: 1}) {
		t.Fatalf("the try after %s: %+v, want it buried", maxAge, got)
	}
	if b := f.buried(t, m.ID); b.LastError != "nats: no responders available for request" {
		t.Errorf("buried with reason %q, want the last error", b.LastError)
	}
}

// A message delivered on its 21st try, within its age, is delivered
// and not buried: the relay's MaxAttempts does not apply to a topic with a
// policy of its own, and the other topics keep it.
func testRelayRetryPolicyIsTheTopicsOwn(t *testing.T) {
	f := newFixture(t, relay.WithRetryPolicy(relay.RetryPolicy{MaxAge: 2 * time.Hour}, "mail")) // MaxAttempts 3
	fails := 20
	f.handle = func(context.Context, outbox.Message) error {
		if fails > 0 {
			fails--
			return errors.New("503 Service Unavailable")
		}
		return nil
	}
	f.add(t, "mail")
	var total relay.DrainStats
	for attempt := 1; attempt <= 21; attempt++ {
		got := f.drain(t)
		total.Retried += got.Retried
		total.Delivered += got.Delivered
		total.Buried += got.Buried
		f.now = f.now.Add(outbox.Backoff(attempt))
	}
	if total != (relay.DrainStats{Retried: 20, Delivered: 1}) {
		t.Errorf("with its own policy: %+v, want 20 retries then a delivery", total)
	}
}

// A message of a topic with a policy of age that keeps crashing the relay
// is claimed again at each lease's end until twice its age has passed,
// then buried without another try.
func testRelayRetryPolicyOfAgeBuriesWhatKeepsCrashing(t *testing.T) {
	f := newFixture(t, relay.WithRetryPolicy(relay.RetryPolicy{MaxAge: time.Hour}, "mail"))
	called := false
	f.handle = func(context.Context, outbox.Message) error { called = true; return nil }
	m := f.add(t, "mail")
	for f.now.Sub(m.CreatedAt) < 2*time.Hour {
		if got, err := f.store.Claim(t.Context(), f.now, outbox.DefaultLease, 10); err != nil || len(got) != 1 {
			t.Fatalf("crashing relay claimed %v, %v; want the message", got, err)
		}
		f.now = f.now.Add(outbox.DefaultLease)
	}
	if got := f.drain(t); got != (relay.DrainStats{Claimed: 1, Buried: 1}) {
		t.Fatalf("claimed after its age: %+v, want it buried", got)
	}
	if called {
		t.Error("the handler ran for a message claimed again after its age")
	}
	if b := f.buried(t, m.ID); !strings.Contains(b.LastError, "claimed more often than allowed") {
		t.Errorf("reason %q does not say the message was claimed again after its age", b.LastError)
	}
}

func testRelayRefusesARetryPolicyThatCannotWork(t *testing.T) {
	t.Parallel()
	for _, p := range []relay.RetryPolicy{{}, {MaxAttempts: -1}, {MaxAge: -time.Second}} {
		_, err := relay.New(nil, map[string]outbox.Handler{}, outbox.RelayConfig{},
			relay.WithRetryPolicy(p, "broker:user.registered"))
		if err == nil || !strings.Contains(err.Error(), `retry policy of "broker:user.registered"`) {
			t.Errorf("policy %+v: error %v, want one naming the topic", p, err)
		}
	}
}

// A message that waited longer than its age before its first try, behind
// an earlier one of its key, still gets MinAttempts tries before its age
// buries it.
func testRelayRetryPolicyGivesALateMessageItsMinimumTries(t *testing.T) {
	f := newFixture(t, relay.WithRetryPolicy(relay.RetryPolicy{MaxAge: time.Hour, MinAttempts: 3}, "mail"))
	f.handle = func(context.Context, outbox.Message) error { return errors.New("503") }
	m := f.add(t, "mail")
	f.now = f.now.Add(2 * time.Hour)
	for attempt := 1; attempt < 3; attempt++ {
		if got := f.drain(t); got != (relay.DrainStats{Claimed: 1, Retried: 1}) {
			t.Fatalf("try %d, %s after its creation: %+v, want a retry", attempt, f.now.Sub(m.CreatedAt), got)
		}
		f.now = f.now.Add(outbox.Backoff(attempt))
	}
	if got := f.drain(t); got != (relay.DrainStats{Claimed: 1, Buried: 1}) {
		t.Fatalf("third try: %+v, want it buried", got)
	}
}
