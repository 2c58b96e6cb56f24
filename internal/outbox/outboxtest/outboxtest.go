package outboxtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
)

// Store is what the suite tests: what the relay uses ([outbox.RelayStore]),
// what the operators use ([outbox.Operator]) and what an erasure uses
// ([outbox.Purger]).
type Store interface {
	outbox.RelayStore
	outbox.Operator
	outbox.Purger
}

// Harness is what the suite needs of a backend: a fresh, empty store per call.
type Harness struct {
	// Runner runs the units of work in which the suite adds messages.
	Runner uow.Runner
	// Store is the store under test. It starts empty and accepts the
	// transactions of Runner.
	Store Store
}

// Features states what a backend guarantees; a backend that cannot give one
// says so here. For the outbox none is expected to be false.
//
// It has no fields yet. One is added, named so that its zero value is the
// full guarantee, only when a backend cannot keep part of the contract.
type Features struct{}

// Run runs the suite. Each case is a parallel subtest that calls setup for a
// store of its own.
func Run(t *testing.T, f Features, setup func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			if h.Runner == nil || h.Store == nil {
				t.Fatalf("setup returned a harness without runner or store: %+v", h)
			}
			c.run(t, suite{Harness: h, features: f})
		})
	}
}

// cases lists the suite; each name is "Method/Behaviour".
var cases = []struct {
	name string
	run  func(t *testing.T, s suite)
}{
	{"Add/DueAtCreatedAt", testAddDueAtCreatedAt},
	{"Add/FieldsRoundTrip", testAddFieldsRoundTrip},
	{"Add/RolledBackStoresNothing", testAddRolledBack},
	{"Add/RejectsBadInput", testAddRejectsBadInput},
	{"Add/NoMessages", testAddNoMessages},
	{"Claim/EarliestDueFirst", testClaimEarliestDueFirst},
	{"Claim/OrdersByDueTimeNotCreation", testClaimOrdersByDueTime},
	{"Claim/RespectsLimit", testClaimRespectsLimit},
	{"Claim/RejectsLimitBelowOne", testClaimRejectsLimitBelowOne},
	{"Claim/LeaseAndAttempts", testClaimLeaseAndAttempts},
	{"Claim/ConcurrentClaimsNeverOverlap", testClaimConcurrent},
	{"Claim/ConcurrentClaimsAndAcks", testClaimConcurrentWithAcks},
	{"Ack/Removes", testAckRemoves},
	{"Ack/UnknownOrAckedIsNotAnError", testAckUnknown},
	{"Retry/BeforeLeaseEnd", testRetryBeforeLeaseEnd},
	{"Retry/AfterLeaseEnd", testRetryAfterLeaseEnd},
	{"Retry/UnknownIsNotFound", testRetryUnknown},
	{"Retry/KeepsReason", testRetryKeepsReason},
	{"Bury/NeverClaimedAgain", testBuryNeverClaimedAgain},
	{"Bury/UnknownIsNotFound", testBuryUnknown},
	{"Lease/SettlesTheLatestClaim", testLeaseSettlesLatestClaim},
	{"Lease/StaleSettlementChangesNothing", testLeaseStaleChangesNothing},
	{"Lease/ClocksThatDisagree", testLeaseClocksDisagree},
	{"Lease/RequeuedMessageIsNotTheOldClaim", testLeaseAfterRequeue},
	{"Lease/ReleaseGivesTheAttemptBack", testLeaseRelease},
	{"Scope/OnlyTopics", testTopicsOnly},
	{"Scope/OnlyLeavesTheRestUntouched", testTopicsOnlyLeavesTheRest},
	{"Scope/OnlyKeepsTheKeyOrder", testTopicsOnlyKeepsTheKeyOrder},
	{"Scope/ExceptTopics", testTopicsExcept},
	{"Scope/From", testScopeFrom},
	{"AckAll", testAckAll},
	{"AckAllIsFenced", testAckAllFenced},
	{"Backlog", testBacklog},
	{"Operator/Buried", testBuried},
	{"Operator/Lookup", testLookup},
	{"Operator/BuriedMessageIsDueAgain", testRequeue},
	{"Operator/ListAndDiscard", testListAndDiscard},
	{"Operator/RedactBuried", testRedactBuried},
	{"Purger/AddressedAndDelete", testPurge},
	{"Key/RoundTrips", testKeyRoundTrips},
	{"Key/OneAtATimeInTheOrderAdded", testKeyOneAtATime},
	{"Key/BuriedStopsHolding", testKeyBuriedStopsHolding},
	{"Key/RequeuedGoesLast", testKeyRequeuedGoesLast},
	{"Key/ConcurrentClaimsKeepTheOrder", testKeyConcurrent},
	{"Origin/RoundTrips", testOriginRoundTrips},
	{"Origin/EmptyWithoutSpanOrRequest", testOriginEmpty},
	{"Origin/KeptByRetryBuryRedactAndRequeue", testOriginKept},
}

// base is the time the suite's messages are created around, truncated to the
// millisecond as [outbox.NewMessage] does.
var base = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// farFuture is later than every lease and retry time the suite uses.
var farFuture = base.AddDate(100, 0, 0)

// lease is the lease of claims that do not test leases.
const lease = time.Minute

// errRollback makes a unit of work roll back.
var errRollback = errors.New("outboxtest: roll back")

// suite is a harness with the helpers the cases share.
type suite struct {
	Harness
	features Features
}

// msg returns a new message for topic created at at.
func (s suite) msg(t *testing.T, topic string, payload any, at time.Time) outbox.Message {
	t.Helper()
	m, err := outbox.NewMessage(topic, payload, at)
	if err != nil {
		t.Fatalf("NewMessage(%q): %v", topic, err)
	}
	return m
}

// add adds msgs in one committed unit of work.
func (s suite) add(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	err := s.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		return s.Store.Add(ctx, tx, msgs...)
	})
	if err != nil {
		t.Fatalf("add %d messages: %v", len(msgs), err)
	}
}

// claim claims at now and fails the test on error.
func (s suite) claim(t *testing.T, now time.Time, lease time.Duration, limit int) []outbox.Message {
	t.Helper()
	got, err := s.Store.Claim(t.Context(), now, lease, limit)
	if err != nil {
		t.Fatalf("Claim(now=%s, lease=%s, limit=%d): %v", now.Format(time.RFC3339Nano), lease, limit, err)
	}
	return got
}

// claimIDs claims at now and checks that it got exactly want, in order.
func (s suite) claimIDs(t *testing.T, now time.Time, limit int, want ...outbox.Message) []outbox.Message {
	t.Helper()
	got := s.claim(t, now, lease, limit)
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("Claim(now=%s, limit=%d) = %s, want %s",
			now.Format(time.RFC3339Nano), limit, describe(got), describe(want))
	}
	return got
}

// nothingDue checks that a claim at now gets nothing.
func (s suite) nothingDue(t *testing.T, now time.Time) {
	t.Helper()
	s.claimIDs(t, now, 1000)
}

// ack acknowledges id and fails the test on error.
func (s suite) ack(t *testing.T, id uuid.UUID) {
	t.Helper()
	if err := s.Store.Ack(t.Context(), id); err != nil {
		t.Fatalf("Ack(%s): %v", id, err)
	}
}

// retry retries id at at and fails the test on error.
func (s suite) retry(t *testing.T, id uuid.UUID, at time.Time, reason string) {
	t.Helper()
	if err := s.Store.Retry(t.Context(), id, at, reason); err != nil {
		t.Fatalf("Retry(%s, %s): %v", id, at.Format(time.RFC3339Nano), err)
	}
}

// bury buries id and fails the test on error.
func (s suite) bury(t *testing.T, id uuid.UUID, reason string) {
	t.Helper()
	if err := s.Store.Bury(t.Context(), id, reason); err != nil {
		t.Fatalf("Bury(%s): %v", id, err)
	}
}

func ids(msgs []outbox.Message) []uuid.UUID {
	out := make([]uuid.UUID, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func describe(msgs []outbox.Message) string {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = fmt.Sprintf("%s(%s, created %s, attempts %d)",
			m.ID, m.Topic, m.CreatedAt.Format(time.RFC3339Nano), m.Attempts)
	}
	return fmt.Sprintf("%d messages %v", len(msgs), parts)
}

// jsonEqual reports whether a and b are JSON documents of equal value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// checkMessage compares a message read back from the store with the one
// added, expecting attempts claims of it.
func checkMessage(t *testing.T, got, want outbox.Message, attempts int) {
	t.Helper()
	if got.ID != want.ID {
		t.Errorf("ID = %s, want %s", got.ID, want.ID)
	}
	if got.Topic != want.Topic {
		t.Errorf("message %s: Topic = %q, want %q", want.ID, got.Topic, want.Topic)
	}
	if !jsonEqual(got.Payload, want.Payload) {
		t.Errorf("message %s: Payload = %s, want JSON equal to %s", want.ID, got.Payload, want.Payload)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("message %s: CreatedAt = %s, want %s", want.ID,
			got.CreatedAt.Format(time.RFC3339Nano), want.CreatedAt.Format(time.RFC3339Nano))
	}
	if got.Attempts != attempts {
		t.Errorf("message %s: Attempts = %d, want %d", want.ID, got.Attempts, attempts)
	}
	if got.Key != want.Key {
		t.Errorf("message %s: Key = %q, want %q", want.ID, got.Key, want.Key)
	}
}

// Add: "Each becomes due at its CreatedAt."
func testAddDueAtCreatedAt(t *testing.T, s suite) {
	early := s.msg(t, "test.early", map[string]int{"n": 1}, base)
	late := s.msg(t, "test.late", map[string]int{"n": 2}, base.Add(time.Second))
	s.add(t, late, early)

	s.nothingDue(t, base.Add(-time.Millisecond))
	s.claimIDs(t, base, 10, early)
	s.nothingDue(t, base.Add(time.Second-time.Millisecond))
	s.claimIDs(t, base.Add(time.Second), 10, late)
}

// Add and Claim: every field comes back as it was added.
func testAddFieldsRoundTrip(t *testing.T, s suite) {
	type address struct {
		Name  string   `json:"name"`
		Email string   `json:"email"`
		Tags  []string `json:"tags"`
	}
	msgs := []outbox.Message{
		s.msg(t, "mail.login_link", map[string]any{
			"to":   address{Name: "Zoë Ünïcødé 日本", Email: "zoe@example.com", Tags: []string{"a", "b"}},
			"link": "https://example.com/sign-in?code=abc&x=<y>",
			"n":    42.5,
			"ok":   true,
			"none": nil,
		}, base.Add(123*time.Millisecond)),
		s.msg(t, "topic with spaces/and.dots", "just a string", base.Add(time.Second+7*time.Millisecond)),
		s.msg(t, "t", []int{3, 1, 2}, base.Add(2*time.Second)),
		s.msg(t, "null.payload", nil, base.Add(3*time.Second)),
	}
	// A payload that is JSON but not as encoding/json writes it.
	spaced := s.msg(t, "spaced", nil, base.Add(4*time.Second))
	spaced.Payload = []byte(" { \"b\" : [ 1 , 2 ] ,\n \"a\" : { } } ")
	msgs = append(msgs, spaced)
	s.add(t, msgs...)

	got := s.claim(t, base.Add(time.Hour), lease, 100)
	if len(got) != len(msgs) {
		t.Fatalf("claimed %s, want the %d added", describe(got), len(msgs))
	}
	byID := make(map[uuid.UUID]outbox.Message, len(got))
	for _, m := range got {
		byID[m.ID] = m
	}
	for _, want := range msgs {
		g, ok := byID[want.ID]
		if !ok {
			t.Errorf("message %s (%s) was not claimed", want.ID, want.Topic)
			continue
		}
		checkMessage(t, g, want, 1)
	}
}

// Add: a unit of work that rolls back adds nothing.
func testAddRolledBack(t *testing.T, s suite) {
	m := s.msg(t, "test.rolled_back", map[string]int{"n": 1}, base)
	err := s.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := s.Store.Add(ctx, tx, m); err != nil {
			return fmt.Errorf("add: %w", err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Do = %v, want the error of fn", err)
	}
	s.nothingDue(t, farFuture)

	// The store still works, so the empty claim above meant something.
	kept := s.msg(t, "test.kept", map[string]int{"n": 2}, base)
	s.add(t, kept)
	s.claimIDs(t, farFuture, 1000, kept)
}

// Add: bad input is an error, and the unit of work that rolls back because
// of it keeps none of its messages.
func testAddRejectsBadInput(t *testing.T, s suite) {
	bad := []struct {
		name  string
		spoil func(*outbox.Message)
	}{
		{"nil ID", func(m *outbox.Message) { m.ID = uuid.Nil }},
		{"empty topic", func(m *outbox.Message) { m.Topic = "" }},
		{"payload not JSON", func(m *outbox.Message) { m.Payload = []byte(`{"unterminated": `) }},
		{"empty payload", func(m *outbox.Message) { m.Payload = nil }},
	}
	for i, b := range bad {
		good := s.msg(t, "test.good", map[string]int{"i": i}, base)
		spoilt := s.msg(t, "test.bad", map[string]int{"i": i}, base)
		b.spoil(&spoilt)
		var addErr error
		err := s.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			addErr = s.Store.Add(ctx, tx, good, spoilt)
			return addErr
		})
		if addErr == nil {
			t.Errorf("Add of a message with %s succeeded, want an error", b.name)
		} else if !errors.Is(err, addErr) {
			t.Errorf("Do = %v, want the error of fn, %v", err, addErr)
		}
	}
	s.nothingDue(t, farFuture)

	kept := s.msg(t, "test.kept", nil, base)
	s.add(t, kept)
	s.claimIDs(t, farFuture, 1000, kept)
}

// Add: no messages is no error.
func testAddNoMessages(t *testing.T, s suite) {
	err := s.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if err := s.Store.Add(ctx, tx); err != nil {
			return err
		}
		return s.Store.Add(ctx, tx, []outbox.Message{}...)
	})
	if err != nil {
		t.Fatalf("Add of no messages: %v", err)
	}
	s.nothingDue(t, farFuture)
}

// Claim: "earliest due first". Messages are created and added out of order,
// so that neither insertion order nor ID order matches due order.
func testClaimEarliestDueFirst(t *testing.T, s suite) {
	order := []int{5, 2, 7, 0, 3, 6, 1, 4}
	byDue := make([]outbox.Message, len(order))
	var added []outbox.Message
	for _, k := range order {
		m := s.msg(t, "test.order", map[string]int{"k": k}, base.Add(time.Duration(k)*time.Second))
		byDue[k] = m
		added = append(added, m)
	}
	s.add(t, added[:4]...)
	s.add(t, added[4:]...)

	now := base.Add(time.Hour)
	s.claimIDs(t, now, 3, byDue[0:3]...)
	s.claimIDs(t, now, 3, byDue[3:6]...)
	s.claimIDs(t, now, 3, byDue[6:8]...)
	s.nothingDue(t, now)
}

// Claim: the order is by due time, which a retry moves, not by creation.
func testClaimOrdersByDueTime(t *testing.T, s suite) {
	older := s.msg(t, "test.older", nil, base)
	newer := s.msg(t, "test.newer", nil, base.Add(time.Second))
	s.add(t, older, newer)
	s.claimIDs(t, base.Add(time.Second), 10, older, newer)
	s.retry(t, older.ID, base.Add(10*time.Second), "later")
	s.retry(t, newer.ID, base.Add(5*time.Second), "sooner")

	s.claimIDs(t, base.Add(time.Hour), 1, newer)
	s.claimIDs(t, base.Add(time.Hour), 1, older)
}

// Claim: "up to limit".
func testClaimRespectsLimit(t *testing.T, s suite) {
	var msgs []outbox.Message
	for i := range 5 {
		msgs = append(msgs, s.msg(t, "test.limit", i, base.Add(time.Duration(i)*time.Millisecond)))
	}
	s.add(t, msgs...)
	now := base.Add(time.Second)
	s.claimIDs(t, now, 1, msgs[0])
	s.claimIDs(t, now, 2, msgs[1:3]...)
	s.claimIDs(t, now, 10, msgs[3:]...)
}

// Claim: a limit below one is an error and claims nothing.
func testClaimRejectsLimitBelowOne(t *testing.T, s suite) {
	m := s.msg(t, "test.limit", nil, base)
	s.add(t, m)
	for _, limit := range []int{0, -1} {
		got, err := s.Store.Claim(t.Context(), base.Add(time.Second), lease, limit)
		if err == nil {
			t.Errorf("Claim(limit=%d) = %s, nil; want an error", limit, describe(got))
		}
	}
	got := s.claimIDs(t, base.Add(time.Second), 10, m)
	checkMessage(t, got[0], m, 1)
}

// Claim: a claim leases until now+lease and counts an attempt; when the
// lease ends, as it does for a relay that crashed, the message is claimed
// again.
func testClaimLeaseAndAttempts(t *testing.T, s suite) {
	m := s.msg(t, "test.lease", map[string]string{"k": "v"}, base)
	other := s.msg(t, "test.other", nil, base.Add(time.Hour))
	s.add(t, m, other)

	first := base.Add(time.Second)
	got := s.claimIDs(t, first, 10, m)
	checkMessage(t, got[0], m, 1)
	s.nothingDue(t, first)
	s.nothingDue(t, first.Add(time.Minute-time.Millisecond))

	second := first.Add(time.Minute)
	got = s.claimIDs(t, second, 10, m)
	checkMessage(t, got[0], m, 2)

	// A longer lease this time. The other message is not due before
	// base+1h, so claims with room for it must still leave it.
	third := second.Add(time.Minute)
	got = s.claim(t, third, 10*time.Minute, 10)
	if !slices.Equal(ids(got), []uuid.UUID{m.ID}) {
		t.Fatalf("third claim = %s, want %s", describe(got), m.ID)
	}
	checkMessage(t, got[0], m, 3)
	s.nothingDue(t, third.Add(10*time.Minute-time.Millisecond))
	got = s.claimIDs(t, third.Add(10*time.Minute), 10, m)
	checkMessage(t, got[0], m, 4)
}

// concurrentMessages adds n messages, in units of work of 100.
func (s suite) concurrentMessages(t *testing.T, n int) []outbox.Message {
	t.Helper()
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = s.msg(t, "test.concurrent", map[string]int{"i": i}, base.Add(time.Duration(i%50)*time.Millisecond))
	}
	for chunk := range slices.Chunk(msgs, 100) {
		s.add(t, chunk...)
	}
	return msgs
}

// claimConcurrently runs claimers goroutines that claim at now, limit at a
// time, until a claim gets nothing, and hands each batch to deliver. It
// returns every ID claimed, once per claim.
func (s suite) claimConcurrently(t *testing.T, claimers, limit, total int, deliver func([]outbox.Message)) []uuid.UUID {
	t.Helper()
	now := base.Add(time.Hour)
	var (
		mu   sync.Mutex
		seen []uuid.UUID
		wg   sync.WaitGroup
	)
	for range claimers {
		wg.Go(func() {
			// A correct store runs out of messages after total claims in
			// all; the bound stops a store that hands out messages forever.
			for range total + 1 {
				got, err := s.Store.Claim(t.Context(), now, time.Hour, limit)
				if err != nil {
					t.Errorf("concurrent Claim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				if len(got) > limit {
					t.Errorf("concurrent Claim(limit=%d) got %d messages", limit, len(got))
				}
				mu.Lock()
				seen = append(seen, ids(got)...)
				mu.Unlock()
				deliver(got)
			}
		})
	}
	wg.Wait()
	return seen
}

// checkEachOnce checks that seen holds every message of msgs exactly once.
func checkEachOnce(t *testing.T, seen []uuid.UUID, msgs []outbox.Message) {
	t.Helper()
	count := make(map[uuid.UUID]int, len(msgs))
	for _, id := range seen {
		count[id]++
	}
	for id, n := range count {
		if n > 1 {
			t.Errorf("message %s was claimed %d times", id, n)
		}
	}
	missing := 0
	for _, m := range msgs {
		if count[m.ID] == 0 {
			missing++
		}
		delete(count, m.ID)
	}
	if missing > 0 {
		t.Errorf("%d of %d messages were never claimed", missing, len(msgs))
	}
	for id := range count {
		t.Errorf("claimed %s, which was never added", id)
	}
}

// Claim: "Concurrent claims never return the same message."
func testClaimConcurrent(t *testing.T, s suite) {
	const n, claimers, limit = 500, 8, 7
	msgs := s.concurrentMessages(t, n)
	seen := s.claimConcurrently(t, claimers, limit, n, func([]outbox.Message) {})
	// Whatever the claimers left, if anything, is claimable now.
	seen = append(seen, ids(s.claim(t, base.Add(time.Hour), time.Hour, 2*n))...)
	checkEachOnce(t, seen, msgs)
}

// Claim and Ack: claims never overlap while other goroutines acknowledge
// what was claimed, and every acknowledged message is gone.
func testClaimConcurrentWithAcks(t *testing.T, s suite) {
	const n, claimers, ackers, limit = 500, 8, 4, 7
	msgs := s.concurrentMessages(t, n)
	claimed := make(chan []outbox.Message)
	var wg sync.WaitGroup
	for range ackers {
		wg.Go(func() {
			for batch := range claimed {
				for _, m := range batch {
					if err := s.Store.Ack(t.Context(), m.ID); err != nil {
						t.Errorf("concurrent Ack(%s): %v", m.ID, err)
					}
				}
			}
		})
	}
	seen := s.claimConcurrently(t, claimers, limit, n, func(batch []outbox.Message) { claimed <- batch })
	close(claimed)
	wg.Wait()
	checkEachOnce(t, seen, msgs)
	s.nothingDue(t, farFuture)
}

// Ack: "removes a delivered message", for good.
func testAckRemoves(t *testing.T, s suite) {
	acked := s.msg(t, "test.acked", nil, base)
	kept := s.msg(t, "test.kept", nil, base)
	s.add(t, acked, kept)
	s.claimIDs(t, base, 10, acked, kept)
	s.ack(t, acked.ID)

	got := s.claimIDs(t, base.Add(lease), 10, kept)
	checkMessage(t, got[0], kept, 2)
	got = s.claimIDs(t, farFuture, 10, kept)
	checkMessage(t, got[0], kept, 3)
}

// Ack: a message the store does not hold is gone either way.
func testAckUnknown(t *testing.T, s suite) {
	m := s.msg(t, "test.acked", nil, base)
	kept := s.msg(t, "test.kept", nil, base)
	s.add(t, m, kept)
	s.ack(t, uuid.New())
	s.claimIDs(t, base, 10, m, kept)
	s.ack(t, m.ID)
	s.ack(t, m.ID)

	s.claimIDs(t, farFuture, 10, kept)
}

// Retry: it ends the lease and makes the message due at at, so a retry time
// before the lease's end makes the message claimable then.
func testRetryBeforeLeaseEnd(t *testing.T, s suite) {
	m := s.msg(t, "test.retry", nil, base)
	other := s.msg(t, "test.other", nil, base)
	s.add(t, m, other)
	if got := s.claim(t, base, time.Hour, 10); len(got) != 2 {
		t.Fatalf("Claim = %s, want both messages", describe(got))
	}
	at := base.Add(10 * time.Second)
	s.retry(t, m.ID, at, "smtp: connection refused")

	s.nothingDue(t, at.Add(-time.Millisecond))
	got := s.claimIDs(t, at, 10, m)
	checkMessage(t, got[0], m, 2)
}

// Retry: a retry time after the lease's end keeps the message until then.
func testRetryAfterLeaseEnd(t *testing.T, s suite) {
	m := s.msg(t, "test.retry", nil, base)
	s.add(t, m)
	s.claimIDs(t, base, 10, m)
	at := base.Add(10 * time.Minute)
	s.retry(t, m.ID, at, "smtp: connection refused")

	s.nothingDue(t, base.Add(lease))
	s.nothingDue(t, at.Add(-time.Millisecond))
	got := s.claimIDs(t, at, 10, m)
	checkMessage(t, got[0], m, 2)
}

// Retry: a message the store does not hold is [outbox.ErrNotFound].
func testRetryUnknown(t *testing.T, s suite) {
	if err := s.Store.Retry(t.Context(), uuid.New(), base, "r"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Retry of an unknown ID = %v, want outbox.ErrNotFound", err)
	}
	m := s.msg(t, "test.acked", nil, base)
	s.add(t, m)
	s.claimIDs(t, base, 10, m)
	s.ack(t, m.ID)
	if err := s.Store.Retry(t.Context(), m.ID, base, "r"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Retry of an acknowledged message = %v, want outbox.ErrNotFound", err)
	}
	s.nothingDue(t, farFuture)
}

// Retry: "keeping reason as its last error", seen through the Inspector.
func testRetryKeepsReason(t *testing.T, s suite) {
	m := s.msg(t, "test.retry", nil, base)
	s.add(t, m)
	s.claimIDs(t, base, 10, m)
	at := base.Add(time.Second)
	s.retry(t, m.ID, at, "421 4.7.0 try again later")
	rec, err := s.Store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LastError != "421 4.7.0 try again later" || !rec.DueAt.Equal(at) || rec.Attempts != 1 || !rec.BuriedAt.IsZero() {
		t.Errorf("after Retry: LastError %q, DueAt %v, Attempts %d, BuriedAt %v; want the reason, %v, 1, zero",
			rec.LastError, rec.DueAt, rec.Attempts, rec.BuriedAt, at)
	}
	s.claimIDs(t, at, 10, m)
	s.retry(t, m.ID, at.Add(time.Second), "second reason")
	if rec, err := s.Store.Lookup(t.Context(), m.ID); err != nil || rec.LastError != "second reason" {
		t.Errorf("after a second Retry: LastError %q, %v; want the newer reason", rec.LastError, err)
	}
}

// Operator: Lookup returns a message as stored, with its delivery state,
// and ErrNotFound for one the store does not hold.
func testLookup(t *testing.T, s suite) {
	m := s.msg(t, "test.lookup", map[string]string{"to": "ada@example.com"}, base)
	s.add(t, m)
	rec, err := s.Store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkMessage(t, rec.Message, m, 0)
	if !rec.DueAt.Equal(base) || rec.LastError != "" || !rec.BuriedAt.IsZero() {
		t.Errorf("new message: DueAt %v, LastError %q, BuriedAt %v; want %v, none, zero", rec.DueAt, rec.LastError, rec.BuriedAt, base)
	}
	s.claimIDs(t, base, 10, m)
	if rec, err := s.Store.Lookup(t.Context(), m.ID); err != nil || !rec.DueAt.Equal(base.Add(lease)) || rec.Attempts != 1 {
		t.Errorf("claimed message: DueAt %v, Attempts %d, %v; want the lease's end %v and 1", rec.DueAt, rec.Attempts, err, base.Add(lease))
	}
	s.ack(t, m.ID)
	if _, err := s.Store.Lookup(t.Context(), m.ID); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Lookup of an acknowledged message = %v, want outbox.ErrNotFound", err)
	}
}

// Operator: a buried message requeued at a time is due then, with its
// attempts counted afresh and its last error kept; only buried messages can
// be requeued.
func testRequeue(t *testing.T, s suite) {
	m := s.msg(t, "test.requeue", nil, base)
	waiting := s.msg(t, "test.waiting", nil, base)
	s.add(t, m, waiting)
	if err := s.Store.Requeue(t.Context(), waiting.ID, base); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Requeue of a message that is not buried = %v, want outbox.ErrNotFound", err)
	}
	if err := s.Store.Requeue(t.Context(), uuid.New(), base); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Requeue of an unknown message = %v, want outbox.ErrNotFound", err)
	}
	for range 3 {
		got := s.claimIDs(t, farFuture, 1, m)
		s.retry(t, got[0].ID, base, "421 busy")
	}
	s.bury(t, m.ID, "550 no such user")
	at := base.Add(time.Hour)
	if err := s.Store.Requeue(t.Context(), m.ID, at); err != nil {
		t.Fatal(err)
	}
	s.ack(t, waiting.ID)
	s.nothingDue(t, at.Add(-time.Millisecond))
	got := s.claimIDs(t, at, 10, m)
	checkMessage(t, got[0], m, 1)
	rec, err := s.Store.Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.LastError != "550 no such user" || !rec.BuriedAt.IsZero() {
		t.Errorf("requeued: LastError %q, BuriedAt %v; want the reason kept, not buried", rec.LastError, rec.BuriedAt)
	}
}

// Bury: "stops delivering a message and keeps it, with reason".
func testBuryNeverClaimedAgain(t *testing.T, s suite) {
	claimed := s.msg(t, "test.claimed", map[string]string{"to": "a@example.com"}, base)
	unclaimed := s.msg(t, "test.unclaimed", map[string]string{"to": "b@example.com"}, base.Add(time.Second))
	kept := s.msg(t, "test.kept", nil, base.Add(2*time.Second))
	s.add(t, claimed, unclaimed, kept)

	s.claimIDs(t, base, 10, claimed)
	s.retry(t, claimed.ID, base.Add(500*time.Millisecond), "smtp: connection refused")
	s.claimIDs(t, base.Add(500*time.Millisecond), 10, claimed)
	s.bury(t, claimed.ID, "smtp: 550 no such mailbox")
	s.bury(t, unclaimed.ID, "no handler for topic test.unclaimed")
	// A relay whose retry races the burial does not bring the message back;
	// whether that retry is an error is not part of the contract.
	_ = s.Store.Retry(t.Context(), claimed.ID, base.Add(time.Second), "late retry")

	s.claimIDs(t, base.Add(time.Hour), 10, kept)
	s.claimIDs(t, farFuture, 10, kept)

	buried, err := s.Store.Buried(t.Context(), 10)
	if err != nil {
		t.Fatalf("Buried: %v", err)
	}
	want := map[uuid.UUID]struct {
		msg      outbox.Message
		reason   string
		attempts int
	}{
		claimed.ID:   {claimed, "smtp: 550 no such mailbox", 2},
		unclaimed.ID: {unclaimed, "no handler for topic test.unclaimed", 0},
	}
	if len(buried) != len(want) {
		t.Fatalf("Buried returned %d messages, want %d: %+v", len(buried), len(want), buried)
	}
	for _, b := range buried {
		w, ok := want[b.ID]
		if !ok {
			t.Errorf("Buried returned %s, which was not buried", b.ID)
			continue
		}
		checkMessage(t, b.Message, w.msg, w.attempts)
		if b.LastError != w.reason {
			t.Errorf("buried %s: Reason = %q, want %q", b.ID, b.LastError, w.reason)
		}
		if b.BuriedAt.IsZero() {
			t.Errorf("buried %s: BuriedAt is zero", b.ID)
		}
	}
}

// Bury: a message the store does not hold is [outbox.ErrNotFound].
func testBuryUnknown(t *testing.T, s suite) {
	if err := s.Store.Bury(t.Context(), uuid.New(), "r"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Bury of an unknown ID = %v, want outbox.ErrNotFound", err)
	}
	m := s.msg(t, "test.acked", nil, base)
	s.add(t, m)
	s.claimIDs(t, base, 10, m)
	s.ack(t, m.ID)
	if err := s.Store.Bury(t.Context(), m.ID, "r"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Bury of an acknowledged message = %v, want outbox.ErrNotFound", err)
	}
	buried, err := s.Store.Buried(t.Context(), 10)
	if err != nil {
		t.Fatalf("Buried: %v", err)
	}
	if len(buried) != 0 {
		t.Errorf("Buried = %+v, want none", buried)
	}
}

// AckAll removes the listed messages and skips unknown IDs.
func testAckAll(t *testing.T, s suite) {
	a := s.msg(t, "test.a", nil, base)
	b := s.msg(t, "test.b", nil, base.Add(time.Millisecond))
	c := s.msg(t, "test.c", nil, base.Add(2*time.Millisecond))
	s.add(t, a, b, c)
	at := base.Add(time.Second)
	claimed := s.claimIDs(t, at, 10, a, b, c)
	unknown := outbox.Lease{ID: uuid.New(), Attempts: 1, Until: at.Add(lease)}
	if err := s.Store.AckAll(t.Context(), []outbox.Lease{leaseOf(claimed[0], at), unknown, leaseOf(claimed[2], at)}); err != nil {
		t.Fatalf("AckAll: %v", err)
	}
	for _, list := range [][]outbox.Lease{nil, {}, {leaseOf(claimed[0], at)}} {
		if err := s.Store.AckAll(t.Context(), list); err != nil {
			t.Errorf("AckAll(%v): %v", list, err)
		}
	}
	got := s.claimIDs(t, farFuture, 10, b)
	checkMessage(t, got[0], b, 2)
}

// Operator: Buried lists buried messages with their reasons, oldest first,
// up to limit.
func testBuried(t *testing.T, s suite) {
	buried := func(limit int) []outbox.Record {
		t.Helper()
		got, err := s.Store.Buried(t.Context(), limit)
		if err != nil {
			t.Fatalf("Buried(%d): %v", limit, err)
		}
		return got
	}
	if got := buried(10); len(got) != 0 {
		t.Fatalf("Buried of an empty store = %+v, want none", got)
	}

	// Created and buried in the same order, so that "oldest" means the
	// same whether it is read as oldest message or oldest burial.
	var m [4]outbox.Message
	for i := range m {
		m[i] = s.msg(t, fmt.Sprintf("test.buried.%d", i), map[string]int{"i": i}, base.Add(time.Duration(i)*time.Second))
	}
	s.add(t, m[3], m[1], m[0], m[2])
	s.claimIDs(t, base.Add(time.Minute), 10, m[:]...)
	reasons := []string{"reason zero", "reason one", "reason two"}
	for i, r := range reasons {
		s.bury(t, m[i].ID, r)
	}

	got := buried(10)
	if len(got) != len(reasons) {
		t.Fatalf("Buried(10) returned %d messages, want %d: %+v", len(got), len(reasons), got)
	}
	for i, b := range got {
		checkMessage(t, b.Message, m[i], 1)
		if b.LastError != reasons[i] {
			t.Errorf("Buried(10)[%d].LastError = %q, want %q", i, b.LastError, reasons[i])
		}
		if b.BuriedAt.IsZero() {
			t.Errorf("Buried(10)[%d].BuriedAt is zero", i)
		}
	}
	got = buried(2)
	if len(got) != 2 || got[0].ID != m[0].ID || got[1].ID != m[1].ID {
		t.Errorf("Buried(2) = %+v, want %s and %s", got, m[0].ID, m[1].ID)
	}
}

// Operator: List narrows by state, topic and limit; Discard throws away
// only buried messages, never one still to deliver.
func testListAndDiscard(t *testing.T, s suite) {
	due := s.msg(t, "test.a", nil, base)
	waiting := s.msg(t, "test.a", nil, base)
	buried := s.msg(t, "test.b", nil, base)
	s.add(t, due, waiting, buried)
	s.claimIDs(t, base, 10, due, waiting, buried)
	s.retry(t, due.ID, base, "421")
	s.retry(t, waiting.ID, base.Add(time.Hour), "421")
	s.bury(t, buried.ID, "550")
	list := func(f outbox.ListFilter, want ...outbox.Message) {
		t.Helper()
		f.Now = base
		if f.Limit == 0 {
			f.Limit = 10
		}
		got, err := s.Store.List(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uuid.UUID
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, ids2(want)) {
			t.Errorf("List(%+v) = %v, want %v", f, ids, ids2(want))
		}
	}
	list(outbox.ListFilter{}, due, buried, waiting)
	list(outbox.ListFilter{Limit: 1}, due)
	list(outbox.ListFilter{State: outbox.StateDue}, due)
	list(outbox.ListFilter{State: outbox.StateWaiting}, waiting)
	list(outbox.ListFilter{State: outbox.StateBuried}, buried)
	list(outbox.ListFilter{Topic: "test.a"}, due, waiting)
	if _, err := s.Store.List(t.Context(), outbox.ListFilter{State: "sleeping", Limit: 1}); err == nil {
		t.Error("List of an unknown state succeeded")
	}

	if err := s.Store.Discard(t.Context(), due.ID); !errors.Is(err, outbox.ErrNotBuried) {
		t.Errorf("Discard of a message still to deliver = %v, want outbox.ErrNotBuried", err)
	}
	if err := s.Store.Discard(t.Context(), uuid.New()); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Discard of an unknown message = %v, want outbox.ErrNotFound", err)
	}
	if err := s.Store.Discard(t.Context(), buried.ID); err != nil {
		t.Fatal(err)
	}
	list(outbox.ListFilter{}, due, waiting)

	// DiscardBuried: only buried messages, of the topic, buried before.
	s.claimIDs(t, base.Add(time.Hour), 10, due, waiting)
	s.bury(t, due.ID, "gone")
	s.bury(t, waiting.ID, "gone")
	if n, err := s.Store.DiscardBuried(t.Context(), "test.other", farFuture); err != nil || n != 0 {
		t.Errorf("DiscardBuried of another topic = %d, %v; want 0", n, err)
	}
	if n, err := s.Store.DiscardBuried(t.Context(), "", time.Now().Add(-24*time.Hour)); err != nil || n != 0 {
		t.Errorf("DiscardBuried of those buried before yesterday = %d, %v; want 0", n, err)
	}
	if n, err := s.Store.DiscardBuried(t.Context(), "test.a", farFuture); err != nil || n != 2 {
		t.Errorf("DiscardBuried = %d, %v; want 2", n, err)
	}
	list(outbox.ListFilter{})
}

func ids2(msgs []outbox.Message) []uuid.UUID {
	if len(msgs) == 0 {
		return nil
	}
	return ids(msgs)
}

// RedactBuried removes the fields from buried messages of the topic
// created before the time, and from no other message: not one still to
// deliver, however old, not a younger one, not another topic's.
func testRedactBuried(t *testing.T, s suite) {
	payload := map[string]string{"to": "ada@example.com", "code": "secret", "url": "https://x.test/?code=secret"}
	old := s.msg(t, "test.a", payload, base)
	young := s.msg(t, "test.a", payload, base.Add(time.Hour))
	other := s.msg(t, "test.b", payload, base)
	live := s.msg(t, "test.a", payload, base)
	s.add(t, old, young, other, live)
	s.claimIDs(t, base.Add(2*time.Hour), 10, old, other, live, young)
	for _, m := range []outbox.Message{old, young, other} {
		s.bury(t, m.ID, "550")
	}
	s.retry(t, live.ID, base.Add(2*time.Hour), "421")

	before := base.Add(30 * time.Minute)
	if n, err := s.Store.RedactBuried(t.Context(), "test.a", []string{"code", "url"}, before); err != nil || n != 1 {
		t.Fatalf("RedactBuried = %d, %v; want 1", n, err)
	}
	if n, err := s.Store.RedactBuried(t.Context(), "test.a", []string{"code", "url"}, before); err != nil || n != 0 {
		t.Errorf("RedactBuried again = %d, %v; want 0, nothing left to redact", n, err)
	}
	for _, bad := range [][]string{nil, {""}, {"a.b"}, {"code'); DROP TABLE x; --"}} {
		if _, err := s.Store.RedactBuried(t.Context(), "test.a", bad, before); err == nil {
			t.Errorf("RedactBuried of fields %q: accepted", bad)
		}
	}
	recs, err := s.Store.List(t.Context(), outbox.ListFilter{Now: base.Add(2 * time.Hour), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("List: %d messages, want 4", len(recs))
	}
	for _, r := range recs {
		var got map[string]string
		if err := json.Unmarshal(r.Payload, &got); err != nil {
			t.Fatalf("payload of %s: %v: %s", r.ID, err, r.Payload)
		}
		want := payload
		if r.ID == old.ID {
			want = map[string]string{"to": "ada@example.com"}
		}
		if !maps.Equal(got, want) {
			t.Errorf("payload of %s (%s) = %v, want %v", r.ID, r.State(base.Add(2*time.Hour)), got, want)
		}
	}
}
