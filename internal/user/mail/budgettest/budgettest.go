package budgettest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// Harness is what the suite needs of a backend: fresh, empty stores per
// call.
type Harness struct {
	// Runner returns a runner whose units of work take their time from
	// now. Store accepts its transactions.
	Runner func(now func() time.Time) uow.Runner
	// Store is the store under test.
	Store mail.BudgetStore
	// Keys is the keyring whose secret names the mailboxes.
	Keys *keyring.Keyring
}

// Features states what a backend's units of work do at once; the zero
// value is the full concurrency.
type Features struct {
	// SerialWriters says that the units of work of Do run one at a time
	// (SQLite's one writer): spends of one budget then take turns before
	// they hold it, and the race of its last unit has nothing to overlap.
	SerialWriters bool
}

// Run runs the suite. Each case is a parallel subtest that calls setup for
// stores of its own.
func Run(t *testing.T, f Features, setup func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			if h.Runner == nil || h.Store == nil || h.Keys == nil {
				t.Fatalf("setup returned an incomplete harness: %+v", h)
			}
			s := newSuite(t, h)
			s.features = f
			c.run(t, s)
		})
	}
}

// cases lists the suite; each name is "Method/Behaviour".
var cases = []struct {
	name string
	run  func(t *testing.T, s *suite)
}{
	{"Store/RoundTrip", testRoundTrip},
	{"Store/ForeignAndReadOnly", testForeignAndReadOnly},
	{"Spend/UpToTheLimitPerMailbox", testUpToTheLimit},
	{"Spend/SlidingWindow", testSlidingWindow},
	{"Spend/OncePerMessage", testOncePerMessage},
	{"Spend/LastUnitOnce", testLastUnitOnce},
	{"Spend/NoAddressReachesTheStore", testNoAddress},
	{"Sweep/IdleBudgetsOnly", testSweep},
}

// start is where every case's clock begins.
var start = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

// Every case's budget: 3 mails an hour.
const (
	limit  = 3
	window = time.Hour
)

type suite struct {
	h        Harness
	features Features
	clock    *testclock.Clock
	runner   uow.Runner
	store    *spyStore
	budget   *mail.Budget
}

func newSuite(t *testing.T, h Harness) *suite {
	t.Helper()
	s := &suite{h: h, clock: testclock.New(start), store: &spyStore{BudgetStore: h.Store}}
	s.runner = h.Runner(s.clock.Now)
	b, err := mail.NewBudget(mail.BudgetConfig{Limit: limit, Window: window}, s.runner, s.store, h.Keys)
	if err != nil {
		t.Fatal(err)
	}
	s.budget = b
	return s
}

// spend spends a unit of the budget of to's mailbox for id, a mail that
// the budget may hold back, and returns whether it may be sent.
func (s *suite) spend(t *testing.T, to string, id uuid.UUID) bool {
	t.Helper()
	send, err := s.budget.Spend(t.Context(), to, id, true)
	if err != nil {
		t.Fatalf("Spend to %s: %v", to, err)
	}
	return send
}

// spends spends for n new messages to to and returns how many may be sent.
func (s *suite) spends(t *testing.T, to string, n int) int {
	t.Helper()
	sent := 0
	for range n {
		if s.spend(t, to, newID(t)) {
			sent++
		}
	}
	return sent
}

func newID(t *testing.T) uuid.UUID {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (s *suite) do(t *testing.T, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	if err := s.runner.Do(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// HoldBudget of a mailbox never kept is empty; it returns what
// KeepBudget kept, at the microsecond, in UTC; keeping none empties it.
func testRoundTrip(t *testing.T, s *suite) {
	const box = "0123456789abcdef0123456789abcdef"
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		got, err := s.h.Store.HoldBudget(ctx, tx, box)
		if err != nil || len(got) != 0 {
			t.Errorf("HoldBudget of a new mailbox: %v, %v; want none", got, err)
		}
		return err
	})
	want := []mail.Spend{
		{MessageID: newID(t), At: start.Add(-time.Minute)},
		{MessageID: newID(t), At: start.Add(123456 * time.Microsecond)},
	}
	in := []mail.Spend{want[0], {MessageID: want[1].MessageID, At: want[1].At.In(time.FixedZone("X", 3600))}}
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		if _, err := s.h.Store.HoldBudget(ctx, tx, box); err != nil {
			return err
		}
		return s.h.Store.KeepBudget(ctx, tx, box, in)
	})
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		got, err := s.h.Store.HoldBudget(ctx, tx, box)
		if err != nil {
			return err
		}
		if !slices.EqualFunc(got, want, func(a, b mail.Spend) bool {
			return a.MessageID == b.MessageID && a.At.Equal(b.At) && a.At.Location() == time.UTC
		}) {
			t.Errorf("HoldBudget after KeepBudget: %v, want %v in UTC", got, want)
		}
		if other, err := s.h.Store.HoldBudget(ctx, tx, strings.Repeat("f", 32)); err != nil || len(other) != 0 {
			t.Errorf("HoldBudget of another mailbox: %v, %v; want none", other, err)
		}
		return s.h.Store.KeepBudget(ctx, tx, box, nil)
	})
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		got, err := s.h.Store.HoldBudget(ctx, tx, box)
		if err != nil || len(got) != 0 {
			t.Errorf("HoldBudget after keeping none: %v, %v; want none", got, err)
		}
		return err
	})
}

// foreignTx is a unit of work of no backend.
type foreignTx struct{}

func (foreignTx) Now() time.Time { return start }

// The store refuses another backend's unit of work, and a hold in a
// read-only one, which could not hold anything.
func testForeignAndReadOnly(t *testing.T, s *suite) {
	ctx := t.Context()
	box := strings.Repeat("a", 32)
	if _, err := s.h.Store.HoldBudget(ctx, foreignTx{}, box); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("HoldBudget in a foreign unit of work: %v, want ErrForeignTx", err)
	}
	if err := s.h.Store.KeepBudget(ctx, foreignTx{}, box, nil); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("KeepBudget in a foreign unit of work: %v, want ErrForeignTx", err)
	}
	if _, err := s.h.Store.SweepBudgets(ctx, foreignTx{}, start, 10); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("SweepBudgets in a foreign unit of work: %v, want ErrForeignTx", err)
	}
	err := s.runner.Read(ctx, func(ctx context.Context, tx uow.Tx) error {
		_, err := s.h.Store.HoldBudget(ctx, tx, box)
		return err
	})
	if !errors.Is(err, uow.ErrReadOnly) {
		t.Errorf("HoldBudget in a read-only unit of work: %v, want ErrReadOnly", err)
	}
}

// A mailbox receives Limit mails, whatever the spellings they went to;
// then what the budget may hold back is held back, and what it may not is
// sent and counted. Another mailbox has a budget of its own.
func testUpToTheLimit(t *testing.T, s *suite) {
	for i, to := range []string{"ada@example.com", "ada+1@example.com", "ADA+News@Example.com"} {
		if !s.spend(t, to, newID(t)) {
			t.Fatalf("mail %d, to %s, was held back within the budget", i+1, to)
		}
	}
	for _, to := range []string{"ada+2@example.com", "ada@example.com"} {
		if s.spend(t, to, newID(t)) {
			t.Errorf("a mail to %s past the budget may be sent", to)
		}
	}
	for _, to := range []string{"bob@example.com", "ada.lovelace@example.com", "ada@example.org"} {
		if n := s.spends(t, to, limit+1); n != limit {
			t.Errorf("%d of %d mails to %s were sent, want the limit, %d", n, limit+1, to, limit)
		}
	}
	s.clock.Advance(10 * time.Minute)
	if send, err := s.budget.Spend(t.Context(), "ada+3@example.com", newID(t), false); err != nil || !send {
		t.Errorf("a mail never held back, past the budget: %t, %v; want it sent", send, err)
	}
	// A window after the first three, the mail never held back still
	// counts: two units are left, not three.
	s.clock.Set(start.Add(window))
	if n := s.spends(t, "ada@example.com", limit); n != limit-1 {
		t.Errorf("%d of %d mails sent beside the mail never held back, want %d", n, limit, limit-1)
	}
}

// The window slides: a unit comes back as its spend leaves the window,
// not sooner.
func testSlidingWindow(t *testing.T, s *suite) {
	const to = "grace@example.com"
	for i := range limit {
		if !s.spend(t, to, newID(t)) {
			t.Fatalf("spend %d held back", i+1)
		}
		s.clock.Advance(10 * time.Minute)
	}
	// Spent at 0, 10 and 20 minutes.
	s.clock.Set(start.Add(window - time.Microsecond))
	if s.spend(t, to, newID(t)) {
		t.Error("a mail a microsecond before the first spend leaves the window was sent")
	}
	s.clock.Set(start.Add(window))
	if !s.spend(t, to, newID(t)) {
		t.Error("a mail once the first spend left the window was held back")
	}
	if s.spend(t, to, newID(t)) {
		t.Error("a second mail before the next spend left the window was sent")
	}
	s.clock.Set(start.Add(window + 10*time.Minute))
	if !s.spend(t, to, newID(t)) {
		t.Error("a mail once the second spend left the window was held back")
	}
	// A day on, the whole budget is there.
	s.clock.Advance(24 * time.Hour)
	if n := s.spends(t, to, limit+1); n != limit {
		t.Errorf("a day on, %d of %d mails sent, want %d", n, limit+1, limit)
	}
}

// A message delivered again spends nothing more, and is sent again; one
// held back is held back again.
func testOncePerMessage(t *testing.T, s *suite) {
	const to = "ada@example.com"
	first := newID(t)
	for range 3 {
		if !s.spend(t, to, first) {
			t.Fatal("a message delivered again was held back")
		}
		s.clock.Advance(time.Minute)
	}
	if n := s.spends(t, "ada+x@example.com", limit); n != limit-1 {
		t.Errorf("%d more mails sent, want %d: the message delivered thrice spent once", n, limit-1)
	}
	held := newID(t)
	for range 2 {
		if s.spend(t, to, held) {
			t.Error("a message held back was sent when delivered again")
		}
	}
	if !s.spend(t, to, first) {
		t.Error("the first message, delivered again past the budget, was held back")
	}
}

// Many spends of one mailbox's last unit at once: one is sent. Where
// units of work run at once, the first to decide keeps its unit of work
// open until every other has asked for the budget, so that a store that
// did not hold it would let them all read it unspent.
func testLastUnitOnce(t *testing.T, s *suite) {
	const to = "ada@example.com"
	if n := s.spends(t, to, limit-1); n != limit-1 {
		t.Fatalf("%d of %d mails sent", n, limit-1)
	}
	const racers = 8
	if !s.features.SerialWriters {
		s.store.gate(racers)
	}
	var wg sync.WaitGroup
	sent := make([]bool, racers)
	errs := make([]error, racers)
	ready := make(chan struct{})
	for i := range racers {
		id := newID(t)
		wg.Go(func() {
			<-ready
			sent[i], errs[i] = s.budget.Spend(t.Context(), fmt.Sprintf("ada+%d@example.com", i), id, true)
		})
	}
	close(ready)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(sent, func(b bool) bool { return !b })); n != 1 {
		t.Errorf("%d of %d spends of the last unit at once were sent, want 1", n, racers)
	}
}

// The store is handed a keyed hash of the mailbox, the same for every
// spelling and another for another mailbox, never an address or a part of
// one.
func testNoAddress(t *testing.T, s *suite) {
	addresses := []string{"ada@example.com", "ada+news@example.com", "bob@example.com"}
	for _, to := range addresses {
		s.spend(t, to, newID(t))
	}
	names := s.store.names()
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("the store saw the mailboxes %v, want two names: one for Ada's spellings, one for Bob's", names)
	}
	hex := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, n := range names {
		if !hex.MatchString(n) {
			t.Errorf("the store saw the mailbox %q, want 128 bits in hex", n)
		}
		for _, part := range []string{"ada", "bob", "example"} {
			if strings.Contains(n, part) {
				t.Errorf("the store saw the mailbox %q, which holds %q", n, part)
			}
		}
	}
}

// A sweep deletes the budgets whose last spend was more than a window and
// a few minutes ago, and no other: a budget spent since keeps counting.
func testSweep(t *testing.T, s *suite) {
	if n := s.spends(t, "ada@example.com", limit); n != limit {
		t.Fatalf("%d mails sent", n)
	}
	s.clock.Advance(30 * time.Minute)
	if n := s.spends(t, "bob@example.com", limit); n != limit {
		t.Fatalf("%d mails sent", n)
	}
	// Ada's spends left the window 10 minutes ago, past the sweep's
	// margin of 5; Bob's are in it.
	s.clock.Set(start.Add(window + 10*time.Minute))
	if n, err := s.budget.Sweep(t.Context()); err != nil || n != 1 {
		t.Errorf("the sweep deleted %d budgets, %v; want Ada's alone", n, err)
	}
	if n, err := s.budget.Sweep(t.Context()); err != nil || n != 0 {
		t.Errorf("a second sweep deleted %d budgets, %v; want none", n, err)
	}
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		for _, name := range s.store.names() {
			spends, err := s.h.Store.HoldBudget(ctx, tx, name)
			if err != nil {
				return err
			}
			if len(spends) != 0 && len(spends) != limit {
				t.Errorf("a budget holds %v after the sweep, want Bob's %d spends or none", spends, limit)
			}
		}
		return nil
	})
	if s.spend(t, "bob@example.com", newID(t)) {
		t.Error("Bob's budget was swept while his spends still count")
	}
	if n := s.spends(t, "ada@example.com", limit); n != limit {
		t.Errorf("%d of %d mails to Ada sent after the sweep, want all", n, limit)
	}
}

// spyStore is a BudgetStore that notes the mailbox names it is handed,
// and, once gated, keeps a spend from keeping its budget until a number of
// holds have begun.
type spyStore struct {
	mail.BudgetStore
	mu   sync.Mutex
	seen []string
	// holds counts the holds begun since gate; all is closed once they
	// reach want.
	holds, want int
	all         chan struct{}
}

// gate makes each KeepBudget from now on wait until n holds have begun.
func (s *spyStore) gate(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds, s.want, s.all = 0, n, make(chan struct{})
}

func (s *spyStore) note(mailbox string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.seen, mailbox) {
		s.seen = append(s.seen, mailbox)
	}
}

// names returns the mailbox names the store was handed, in the order it
// first saw them.
func (s *spyStore) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

func (s *spyStore) HoldBudget(ctx context.Context, tx uow.Tx, mailbox string) ([]mail.Spend, error) {
	s.note(mailbox)
	s.mu.Lock()
	if s.all != nil {
		if s.holds++; s.holds == s.want {
			close(s.all)
		}
	}
	s.mu.Unlock()
	return s.BudgetStore.HoldBudget(ctx, tx, mailbox)
}

func (s *spyStore) KeepBudget(ctx context.Context, tx uow.Tx, mailbox string, spends []mail.Spend) error {
	s.note(mailbox)
	s.mu.Lock()
	all := s.all
	s.mu.Unlock()
	if all != nil {
		select {
		case <-all:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.BudgetStore.KeepBudget(ctx, tx, mailbox, spends)
}
