package user_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/timingtest"
	"github.com/eventsourced/accounts/internal/user"
)

// A request for a sign-in link takes as long for an address that asked
// for one a minute ago as for an address that never asked, so that its
// time does not tell an observer whether the address is in use:
// timingtest finds the two kinds alike, the median of the pairs' ratios
// within 5% of 1 and no difference that a Mann-Whitney U test finds at
// the 1% level.
//
// Each kind commits once, so the commit waits for no disk (PostgreSQL's
// synchronous_commit off, SQLite's file in memory where the system has a
// file system there): a flush on a disk that others share varies by
// milliseconds and would hide the difference the test looks for. Each
// measurement asks for new addresses. The test runs alone, not in
// parallel, since it measures time, and under the race detector in a
// binary built without it (timingtest.RerunWithoutRaceDetector).
func TestSignInLinkRequestTimeTellsNothing(t *testing.T) {
	// How many requests of each kind are timed: SQLite's run in the
	// process and vary less.
	for backend, samples := range map[string]int{"PostgreSQL": 800, "SQLite": 300} {
		t.Run(backend, func(t *testing.T) {
			if timingtest.RerunWithoutRaceDetector(t) {
				return
			}
			clock := testclock.New(start)
			svc := timingService(t, backend, clock)
			timingtest.Measure(t, "for a fresh address", "for one that asked a minute ago", func(try int) ([]float64, []float64) {
				return timeSignInLinkRequests(t, svc, clock, try, samples)
			})
		})
	}
}

// timeSignInLinkRequests returns the times of n requests for a sign-in
// link to addresses that never asked for one and of n to addresses that
// asked for one a minute before ([timingtest.Pairs]); try names the
// addresses apart from those of other tries.
func timeSignInLinkRequests(t *testing.T, svc *user.Service, clock *testclock.Clock, try, n int) (fresh, asked []float64) {
	t.Helper()
	addresses := func(kind string) []string {
		out := make([]string, n+timingtest.WarmUp)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%d-%d@example.com", kind, try, i)
		}
		return out
	}
	request := func(to []string) func(i int) {
		return func(i int) {
			if err := svc.RequestSignInLink(t.Context(), to[i]); err != nil {
				t.Fatalf("a link for %s: %v", to[i], err)
			}
		}
	}
	freshTo, askedTo := addresses("fresh"), addresses("asked")
	for i := range askedTo {
		request(askedTo)(i)
	}
	clock.Advance(time.Minute)
	return timingtest.Pairs(n, request(freshTo), request(askedTo))
}

// timingService returns a service on a fresh database of backend, whose
// units of work read clock and commit without waiting for a disk.
func timingService(t *testing.T, backend string, clock *testclock.Clock) *user.Service {
	t.Helper()
	var d user.Deps
	switch backend {
	case "PostgreSQL":
		db := pgtest.NewUnflushed(t)
		d = user.Deps{Runner: db.Runner(clock.Now), Events: db.Events(), Outbox: db.Outbox(), Views: postgres.UserViews{}, Keys: keyringtest.New(t, postgres.DataKeys{})}
	case "SQLite":
		db := sqlitetest.NewInMemory(t)
		d = user.Deps{Runner: db.Runner(clock.Now), Events: db.Events(), Outbox: db.Outbox(), Views: sqlite.UserViews{}, Keys: keyringtest.New(t, sqlite.DataKeys{})}
	default:
		t.Fatalf("no backend %q", backend)
	}
	svc, err := user.NewService(d, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
