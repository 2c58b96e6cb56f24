package outboxtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
)

// leaseOf returns the lease of m, claimed at at for the suite's lease.
func leaseOf(m outbox.Message, at time.Time) outbox.Lease {
	return outbox.LeaseOf(m, at, lease)
}

// under returns the test's context carrying l.
func under(t *testing.T, l outbox.Lease) context.Context {
	return outbox.WithLease(t.Context(), l)
}

// Lease: under the lease of its latest claim, Retry, Bury and Ack settle a
// message as they do by ID.
func testLeaseSettlesLatestClaim(t *testing.T, s suite) {
	m := s.msg(t, "test.lease", nil, base)
	acked := s.msg(t, "test.lease.acked", nil, base)
	s.add(t, m, acked)
	got := s.claimIDs(t, base, 10, m, acked)
	retryAt := base.Add(time.Second)
	if err := s.Store.Retry(under(t, leaseOf(got[0], base)), m.ID, retryAt, "421 later"); err != nil {
		t.Fatalf("Retry under the latest lease: %v", err)
	}
	if err := s.Store.Ack(under(t, leaseOf(got[1], base)), acked.ID); err != nil {
		t.Fatalf("Ack under the latest lease: %v", err)
	}
	again := s.claimIDs(t, retryAt, 10, m)
	if err := s.Store.Bury(under(t, leaseOf(again[0], retryAt)), m.ID, "550 no such user"); err != nil {
		t.Fatalf("Bury under the latest lease: %v", err)
	}
	s.nothingDue(t, farFuture)
	buried, err := s.Store.Buried(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(buried) != 1 || buried[0].ID != m.ID || buried[0].LastError != "550 no such user" {
		t.Errorf("buried %+v, want only %s with its reason", buried, m.ID)
	}
}

// Lease: once a message is claimed again, or settled, a settlement under an
// older lease changes nothing: Ack succeeds and removes nothing, Retry and
// Bury return ErrLeaseLost.
func testLeaseStaleChangesNothing(t *testing.T, s suite) {
	m := s.msg(t, "test.lease", nil, base)
	s.add(t, m)
	first := leaseOf(s.claimIDs(t, base, 10, m)[0], base)
	// The first claim's lease ends and another relay claims the message.
	second := leaseOf(s.claimIDs(t, first.Until, 10, m)[0], first.Until)

	stale := under(t, first)
	if err := s.Store.Retry(stale, m.ID, base, "late failure"); !errors.Is(err, outbox.ErrLeaseLost) {
		t.Errorf("Retry under a lease claimed again since = %v, want outbox.ErrLeaseLost", err)
	}
	if err := s.Store.Bury(stale, m.ID, "late burial"); !errors.Is(err, outbox.ErrLeaseLost) {
		t.Errorf("Bury under a lease claimed again since = %v, want outbox.ErrLeaseLost", err)
	}
	if err := s.Store.Ack(stale, m.ID); err != nil {
		t.Errorf("Ack under a lease claimed again since = %v, want nil", err)
	}
	// The second claim still holds the message, whole.
	s.nothingDue(t, second.Until.Add(-time.Millisecond))
	rec, err := s.Store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatalf("the message is gone after a stale Ack: %v", err)
	}
	if rec.LastError != "" || !rec.BuriedAt.IsZero() || !rec.DueAt.Equal(second.Until) || rec.Attempts != 2 {
		t.Errorf("after stale settlements: %+v; want the second claim's state untouched", rec)
	}

	// A settled lease is stale too: after its Retry, it settles nothing more.
	retryAt := second.Until.Add(time.Second)
	if err := s.Store.Retry(under(t, second), m.ID, retryAt, "421 later"); err != nil {
		t.Fatalf("Retry under the latest lease: %v", err)
	}
	if err := s.Store.Retry(under(t, second), m.ID, farFuture, "twice"); !errors.Is(err, outbox.ErrLeaseLost) {
		t.Errorf("a second Retry under a settled lease = %v, want outbox.ErrLeaseLost", err)
	}
	if err := s.Store.Ack(under(t, second), m.ID); err != nil {
		t.Errorf("Ack under a settled lease = %v, want nil", err)
	}
	third := leaseOf(s.claimIDs(t, retryAt, 10, m)[0], retryAt)
	if err := s.Store.Ack(under(t, third), m.ID); err != nil {
		t.Fatal(err)
	}
	s.nothingDue(t, farFuture)
}

// Lease: two relays whose clocks disagree by several seconds. The one whose
// clock is ahead claims a message while the other still believes its lease
// holds; the one behind then settles under its lease and changes nothing,
// and the one ahead settles the message.
func testLeaseClocksDisagree(t *testing.T, s suite) {
	const skew = 7 * time.Second
	m := s.msg(t, "test.skew", nil, base)
	s.add(t, m)
	// The relay behind claims at base on its clock.
	behind := leaseOf(s.claimIDs(t, base, 10, m)[0], base)
	// lease-5s later, by the true time, the relay ahead reads lease+2s
	// past base on its clock: the first lease has ended there.
	aheadNow := base.Add(lease - 5*time.Second + skew)
	ahead := leaseOf(s.claimIDs(t, aheadNow, 10, m)[0], aheadNow)
	// The relay behind finishes within its lease by its clock and records
	// a failure, a burial and an acknowledgement: none changes anything.
	ctx := under(t, behind)
	if err := s.Store.Retry(ctx, m.ID, base.Add(time.Second), "421 later"); !errors.Is(err, outbox.ErrLeaseLost) {
		t.Errorf("Retry of the relay behind = %v, want outbox.ErrLeaseLost", err)
	}
	if err := s.Store.Bury(ctx, m.ID, "550"); !errors.Is(err, outbox.ErrLeaseLost) {
		t.Errorf("Bury of the relay behind = %v, want outbox.ErrLeaseLost", err)
	}
	if err := s.Store.Ack(ctx, m.ID); err != nil {
		t.Errorf("Ack of the relay behind = %v, want nil", err)
	}
	// The message is still leased to the relay ahead, by any clock before
	// the end of its lease.
	s.nothingDue(t, ahead.Until.Add(-time.Millisecond))
	if err := s.Store.Ack(under(t, ahead), m.ID); err != nil {
		t.Fatal(err)
	}
	s.nothingDue(t, farFuture)
}

// Lease: a message buried and requeued, then claimed again, is not the claim
// it was before, even at the same attempt count.
func testLeaseAfterRequeue(t *testing.T, s suite) {
	m := s.msg(t, "test.requeue", nil, base)
	s.add(t, m)
	old := leaseOf(s.claimIDs(t, base, 10, m)[0], base)
	s.bury(t, m.ID, "550")
	at := base.Add(time.Hour)
	if err := s.Store.Requeue(t.Context(), m.ID, at); err != nil {
		t.Fatal(err)
	}
	fresh := leaseOf(s.claimIDs(t, at, 10, m)[0], at)
	if fresh.Attempts != old.Attempts {
		t.Fatalf("requeued message claimed at attempt %d, want %d as before", fresh.Attempts, old.Attempts)
	}
	if err := s.Store.Ack(under(t, old), m.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Store.Retry(under(t, old), m.ID, at, "late"); !errors.Is(err, outbox.ErrLeaseLost) {
		t.Errorf("Retry under the claim before the requeue = %v, want outbox.ErrLeaseLost", err)
	}
	s.nothingDue(t, fresh.Until.Add(-time.Millisecond))
}

// claimTopics claims at now under f, checks that it got exactly want, in
// order, and returns what it got.
func (s suite) claimTopics(t *testing.T, f outbox.Scope, now time.Time, want ...outbox.Message) []outbox.Message {
	t.Helper()
	got, err := s.Store.Claim(outbox.WithScope(t.Context(), f), now, lease, 100)
	if err != nil {
		t.Fatalf("Claim under %+v: %v", f, err)
	}
	if len(got) != len(want) {
		t.Fatalf("Claim under %+v = %s, want %s", f, describe(got), describe(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID {
			t.Fatalf("Claim under %+v = %s, want %s", f, describe(got), describe(want))
		}
	}
	return got
}

// Scope: a claim with Only takes due messages of those topics alone, in
// due order.
func testTopicsOnly(t *testing.T, s suite) {
	a := s.msg(t, "test.x", nil, base)
	b := s.msg(t, "test.y", nil, base.Add(time.Millisecond))
	c := s.msg(t, "test.z", nil, base.Add(2*time.Millisecond))
	d := s.msg(t, "test.y", nil, base.Add(3*time.Millisecond))
	s.add(t, d, c, b, a)
	now := base.Add(time.Second)
	s.claimTopics(t, outbox.Scope{Only: []string{"test.y"}}, now, b, d)
	s.claimTopics(t, outbox.Scope{Only: []string{"test.z", "test.x", "test.w"}}, now, a, c)
	s.claimTopics(t, outbox.Scope{Only: []string{"test.x"}}, now)
}

// Scope: a claim with Only leaves the messages of other topics as they
// were, as a relay that has no handler for them must: not leased, their
// attempts unspent, due at once for a claim that asks for them. With From
// it narrows by both, as a relay's claim from its cursor does.
func testTopicsOnlyLeavesTheRest(t *testing.T, s suite) {
	a := s.msg(t, "test.mail", nil, base)
	b := s.msg(t, "test:webhook", nil, base.Add(time.Millisecond))
	c := s.msg(t, "test.mail", nil, base.Add(2*time.Millisecond))
	s.add(t, c, b, a)
	now := base.Add(time.Second)
	only := []string{"test.mail"}
	s.claimTopics(t, outbox.Scope{Only: only, From: base.Add(time.Millisecond)}, now, c)
	s.claimTopics(t, outbox.Scope{Only: only}, now, a)
	s.claimTopics(t, outbox.Scope{Only: only}, now)
	rec, err := s.Store.Lookup(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempts != 0 || !rec.DueAt.Equal(b.CreatedAt) || rec.LastError != "" || !rec.BuriedAt.IsZero() {
		t.Errorf("the message of another topic after claims of test.mail: attempts %d, due %s, last error %q, buried %s; want it untouched",
			rec.Attempts, rec.DueAt.Format(time.RFC3339Nano), rec.LastError, rec.BuriedAt)
	}
	got := s.claimTopics(t, outbox.Scope{Only: []string{"test:webhook", "test.sms"}}, now, b)
	checkMessage(t, got[0], b, 1)
	s.nothingDue(t, now)
}

// Scope: a keyed message of a topic that Only leaves out is not claimed,
// and it still holds the later messages of its key in the topics Only
// names: a key's order does not depend on which claims ask for which
// topics.
func testTopicsOnlyKeepsTheKeyOrder(t *testing.T, s suite) {
	first := s.msg(t, "test:webhook", map[string]int{"n": 1}, base)
	first.Key = "user-1"
	then := s.msg(t, "test.mail", map[string]int{"n": 2}, base.Add(time.Millisecond))
	then.Key = "user-1"
	other := s.msg(t, "test.mail", map[string]int{"n": 3}, base.Add(2*time.Millisecond))
	other.Key = "user-2"
	s.add(t, first, then, other)
	now := base.Add(time.Second)
	only := outbox.Scope{Only: []string{"test.mail"}}
	s.claimTopics(t, only, now, other)
	got := s.claimTopics(t, outbox.Scope{Only: []string{"test:webhook"}}, now, first)
	s.ack(t, got[0].ID)
	s.claimTopics(t, only, now, then)
}

// Scope: a claim with Except passes over those topics' messages, which
// stay due for other claims.
func testTopicsExcept(t *testing.T, s suite) {
	a := s.msg(t, "test.x", nil, base)
	b := s.msg(t, "test.y", nil, base.Add(time.Millisecond))
	c := s.msg(t, "test.z", nil, base.Add(2*time.Millisecond))
	s.add(t, c, b, a)
	now := base.Add(time.Second)
	s.claimTopics(t, outbox.Scope{Except: []string{"test.y", "test.w"}}, now, a, c)
	s.claimTopics(t, outbox.Scope{Except: []string{"test.x"}}, now, b)
	s.nothingDue(t, now)
}

// AckAll removes a message only under the lease of its latest claim.
func testAckAllFenced(t *testing.T, s suite) {
	a := s.msg(t, "test.a", nil, base)
	b := s.msg(t, "test.b", nil, base.Add(time.Millisecond))
	s.add(t, a, b)
	at := base.Add(time.Second)
	got := s.claimIDs(t, at, 10, a, b)
	oldA, oldB := leaseOf(got[0], at), leaseOf(got[1], at)
	// a's lease ends and another relay claims it; b is still held.
	newA := leaseOf(s.claimIDs(t, oldA.Until, 1, a)[0], oldA.Until)
	if err := s.Store.AckAll(t.Context(), []outbox.Lease{oldA, oldB}); err != nil {
		t.Fatal(err)
	}
	s.nothingDue(t, newA.Until.Add(-time.Millisecond))
	if err := s.Store.AckAll(t.Context(), []outbox.Lease{newA}); err != nil {
		t.Fatal(err)
	}
	s.nothingDue(t, farFuture)
}

// Backlog counts the due and the buried messages, and finds the due time
// of the longest-due one, ignoring leased and buried ones.
func testBacklog(t *testing.T, s suite) {
	check := func(now time.Time, want outbox.Backlog) {
		t.Helper()
		got, err := s.Store.Backlog(t.Context(), now)
		if err != nil {
			t.Fatalf("Backlog(%s): %v", now.Format(time.RFC3339Nano), err)
		}
		if got.Due != want.Due || got.Buried != want.Buried || !got.OldestDue.Equal(want.OldestDue) {
			t.Fatalf("Backlog(%s) = %+v, want %+v", now.Format(time.RFC3339Nano), got, want)
		}
	}
	check(farFuture, outbox.Backlog{})

	var m [4]outbox.Message
	for i := range m {
		m[i] = s.msg(t, "test.due", i, base.Add(time.Duration(i+1)*time.Second))
	}
	s.add(t, m[2], m[0], m[3], m[1])
	now := base.Add(10 * time.Second)

	check(base.Add(time.Second-time.Millisecond), outbox.Backlog{})
	check(base.Add(time.Second), outbox.Backlog{Due: 1, OldestDue: m[0].CreatedAt})
	check(now, outbox.Backlog{Due: 4, OldestDue: m[0].CreatedAt})

	s.claimIDs(t, now, 1, m[0])
	check(now, outbox.Backlog{Due: 3, OldestDue: m[1].CreatedAt})
	s.bury(t, m[1].ID, "buried")
	check(now, outbox.Backlog{Due: 2, Buried: 1, OldestDue: m[2].CreatedAt})
	retryAt := base.Add(2500 * time.Millisecond)
	s.retry(t, m[0].ID, retryAt, "failed")
	check(now, outbox.Backlog{Due: 3, Buried: 1, OldestDue: retryAt})

	for _, x := range []outbox.Message{m[0], m[2], m[3]} {
		s.ack(t, x.ID)
	}
	check(farFuture, outbox.Backlog{Buried: 1})
}

// Scope: a claim with From leaves out messages due before it, whether they
// are due at their creation or at their retry time.
func testScopeFrom(t *testing.T, s suite) {
	a := s.msg(t, "test.a", nil, base)
	b := s.msg(t, "test.b", nil, base.Add(time.Second))
	c := s.msg(t, "test.c", nil, base.Add(2*time.Second))
	s.add(t, c, b, a)
	now := base.Add(time.Minute)
	s.claimTopics(t, outbox.Scope{From: base.Add(time.Second)}, now, b, c)
	got := s.claimIDs(t, now, 10, a)
	s.retry(t, got[0].ID, base.Add(3*time.Second), "421 later")
	s.claimTopics(t, outbox.Scope{From: base.Add(3*time.Second + time.Millisecond)}, now)
	s.claimTopics(t, outbox.Scope{From: base.Add(3 * time.Second), Except: []string{"test.b"}}, now, a)
}

// Lease: Retry under a released lease makes the message due at its time and
// gives back the attempt its claim counted, keeping the last error; it
// settles the claim, so the lease is stale afterwards.
func testLeaseRelease(t *testing.T, s suite) {
	m := s.msg(t, "test.release", nil, base)
	s.add(t, m)
	first := s.claimIDs(t, base, 10, m)[0]
	s.retry(t, m.ID, base.Add(time.Second), "421 later")
	second := leaseOf(s.claimIDs(t, base.Add(time.Second), 10, m)[0], base.Add(time.Second))
	if first.Attempts != 1 || second.Attempts != 2 {
		t.Fatalf("claims counted attempts %d and %d, want 1 and 2", first.Attempts, second.Attempts)
	}
	released := second
	released.Released = true
	at := base.Add(2 * time.Second)
	if err := s.Store.Retry(under(t, released), m.ID, at, "released"); err != nil {
		t.Fatalf("Retry under a released lease: %v", err)
	}
	if err := s.Store.Retry(under(t, released), m.ID, at, "released twice"); !errors.Is(err, outbox.ErrLeaseLost) {
		t.Errorf("a second release = %v, want outbox.ErrLeaseLost", err)
	}
	s.nothingDue(t, at.Add(-time.Millisecond))
	got := s.claimIDs(t, at, 10, m)
	checkMessage(t, got[0], m, 2)
	rec, err := s.Store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LastError != "421 later" {
		t.Errorf("after a release: last error %q, want the failure's kept", rec.LastError)
	}
}
