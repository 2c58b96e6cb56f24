package org_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/dbdump"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/timingtest"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// An invitation takes as long to an address that has an account, not a
// member, as to an address that has none, so that an owner, which any
// account can become by creating an organization, cannot tell from its
// time whether an address has an account: timingtest finds the two kinds
// alike, the median of the pairs' ratios within 5% of 1 and no
// difference that a Mann-Whitney U test finds at the 1% level.
//
// Every timed invitation goes to a new address, into an organization of
// its own that its owner has just created, so that each finds what every
// other finds: an organization of two events that has sent nothing, and
// no invitation to the address. The organization's limit of invitations is
// then never reached, and no mail is delivered, so no mailbox spends its
// budget. The commits wait for no disk (PostgreSQL's synchronous_commit
// off, SQLite's file in memory where the system has a file system there),
// as in the sign-in link's timing test: a flush varies by milliseconds and
// would hide the difference the test looks for. The test runs alone, not
// in parallel, and under the race detector in a binary built without it
// (timingtest.RerunWithoutRaceDetector).
func TestInvitationTimeTellsNothing(t *testing.T) {
	for _, db := range timingDatabases {
		t.Run(db.name, func(t *testing.T) {
			if timingtest.RerunWithoutRaceDetector(t) {
				return
			}
			// Each owner sends up to a hundred invitations, one into
			// each of its organizations, past the account's default
			// limit.
			b := setup(t, db.database, org.Policy{InvitationAccountLimit: 1 << 20})
			timingtest.Measure(t, "to an address without an account", "to one whose account is no member", func(try int) ([]float64, []float64) {
				return b.timeInvitations(t, try, db.samples)
			})
		})
	}
}

// timingDatabase is a backend of the timing test, whose units of work
// commit without waiting for a disk.
type timingDatabase struct {
	database
	// samples is how many invitations of each kind are timed: SQLite's
	// run in the process and vary less.
	samples int
}

var timingDatabases = []timingDatabase{
	{samples: 800, database: database{name: "postgres", open: func(t *testing.T) (backend.Backend, func(t *testing.T) []dbdump.Row) {
		return pgtest.NewUnflushed(t), nil
	}}},
	{samples: 300, database: database{name: "sqlite", open: func(t *testing.T) (backend.Backend, func(t *testing.T) []dbdump.Row) {
		return sqlitetest.NewInMemory(t), nil
	}}},
}

// timeInvitations returns the times of n invitations to addresses that
// have no account and of n to addresses whose accounts are no members
// ([timingtest.Pairs]); try names the addresses apart from those of other
// tries. It checks that each invitation was mailed.
func (b *bundle) timeInvitations(t *testing.T, try, n int) (none, account []float64) {
	t.Helper()
	total := n + timingtest.WarmUp
	addresses := func(kind string) []string {
		out := make([]string, total)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%d-%d@example.com", kind, try, i)
		}
		return out
	}
	noneTo, accountTo := addresses("none"), addresses("acct")
	for _, a := range accountTo {
		b.signIn(t, a)
	}
	// The ith pair's invitations go into organizations 2i and 2i+1, of
	// one owner, who can be a member of org.MaxOrganizations.
	orgs, owners := make([]uuid.UUID, 2*total), make([]string, 2*total)
	for i := range orgs {
		if i%org.MaxOrganizations == 0 {
			owners[i] = b.signIn(t, fmt.Sprintf("owner-%d-%d@example.com", try, i/org.MaxOrganizations)).Token
		} else {
			owners[i] = owners[i-1]
		}
		orgs[i] = b.create(t, owners[i], fmt.Sprintf("timing %d-%d", try, i)).ID
	}
	invite := func(to []string, of int) func(i int) {
		return func(i int) {
			if err := b.svc.Invite(t.Context(), owners[2*i+of], orgs[2*i+of], to[i], org.RoleMember); err != nil {
				t.Fatalf("Invite(%s): %v", to[i], err)
			}
		}
	}
	none, account = timingtest.Pairs(n, invite(noneTo, 0), invite(accountTo, 1))
	b.take(t)
	sent := map[string]bool{}
	for _, m := range b.mails {
		if m.Topic == mail.TopicOrgInvitation {
			sent[m.Link.To] = true
		}
	}
	b.mails = nil
	for _, a := range append(noneTo, accountTo...) {
		if !sent[a] {
			t.Fatalf("no invitation mailed to %s", a)
		}
	}
	return none, account
}
