// Package backendtest runs every conformance suite of the ports of a
// [backend.Backend] from one entry point, as River's driver test suite
// does for its drivers. Each backend has one test that calls [Run]:
//
//	func TestBackend(t *testing.T) {
//		t.Parallel()
//		backendtest.Run(t, backendtest.Features{}, func(t *testing.T) backendtest.Harness {
//			db := sqlitetest.New(t)
//			return backendtest.Harness{Backend: db, ...}
//		})
//	}
//
// The suites are those of the unit of work (uowtest), the event store
// (eventstoretest), the outbox store (outboxtest), the event log
// (logtest), the keyring's store (keyringtest), the user views
// (user/viewstest), the organizations' views (org/viewstest) and the
// mail budgets (budgettest); each runs as a subtest
// named for its port, its cases as parallel subtests of that, each on a
// fresh database of its own.
package backendtest

import (
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/eventstore/eventstoretest"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	orgviewstest "github.com/eventsourced/accounts/internal/org/viewstest"
	"github.com/eventsourced/accounts/internal/outbox/outboxtest"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/projections/async/logtest"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/uow/uowtest"
	"github.com/eventsourced/accounts/internal/user/mail/budgettest"
	"github.com/eventsourced/accounts/internal/user/viewstest"
)

// Harness is a fresh database for one case of a suite, and what the
// suites need that only the backend can give: a test table, a second
// process, a look at the rows.
type Harness struct {
	// Backend is a fresh, migrated, empty database, closed when the test
	// ends.
	Backend backend.Backend
	// LogConfig configures the event log under the log suite, as
	// [logtest.Harness.Log] asks: subscribers that poll every few
	// milliseconds, deliver a failed message again as soon, give up on a
	// handler after well under a second and read batches of at least 10.
	LogConfig async.LogConfig
	// LogSink makes the log suite's test table on Backend and returns
	// the sink that writes it ([logtest.Sink]).
	LogSink func(t *testing.T) logtest.Sink
	// OtherProcessLog returns a Log of Backend's database configured by
	// LogConfig, as another process would open it, and a crash that
	// breaks it ([logtest.Harness.OtherProcess]).
	OtherProcessLog func(t *testing.T) (log async.Log, crash func())
	// ViewTables, when set, returns every row of the user views' tables,
	// by table ([viewstest.Harness.Tables]).
	ViewTables func(t *testing.T) map[string][]string
}

// Features states what a backend guarantees, suite by suite; the zero
// value of each is the full guarantee.
type Features struct {
	EventStore  eventstoretest.Features
	Outbox      outboxtest.Features
	Log         logtest.Features
	MailBudgets budgettest.Features
}

// Run runs every suite on the databases that setup returns; setup is
// called once per case and registers its cleanup with t.
func Run(t *testing.T, f Features, setup func(t *testing.T) Harness) {
	t.Helper()
	open := func(t *testing.T) Harness {
		t.Helper()
		h := setup(t)
		if h.Backend == nil {
			t.Fatal("backendtest: setup returned no backend")
		}
		return h
	}
	runners := func(b backend.Backend) func(now func() time.Time) uow.Runner {
		return func(now func() time.Time) uow.Runner { return b.Runner(now) }
	}
	t.Run("UnitOfWork", func(t *testing.T) {
		t.Parallel()
		uowtest.Run(t, func(t *testing.T) uowtest.Harness {
			b := open(t).Backend
			return uowtest.Harness{Runner: runners(b), Outbox: b.Outbox(), Events: b.Events()}
		})
	})
	t.Run("EventStore", func(t *testing.T) {
		t.Parallel()
		eventstoretest.Run(t, f.EventStore, func(t *testing.T) eventstoretest.Harness {
			b := open(t).Backend
			return eventstoretest.Harness{Runner: b.Runner(nil), RunnerAt: runners(b), Store: b.Events()}
		})
	})
	t.Run("Outbox", func(t *testing.T) {
		t.Parallel()
		outboxtest.Run(t, f.Outbox, func(t *testing.T) outboxtest.Harness {
			b := open(t).Backend
			return outboxtest.Harness{Runner: b.Runner(nil), Store: b.Outbox()}
		})
	})
	t.Run("Log", func(t *testing.T) {
		t.Parallel()
		logtest.Run(t, f.Log, func(t *testing.T) logtest.Harness {
			h := open(t)
			if h.LogSink == nil || h.OtherProcessLog == nil {
				t.Fatal("backendtest: setup returned no LogSink or OtherProcessLog")
			}
			b := h.Backend
			return logtest.Harness{
				Runner:       b.Runner(nil),
				Store:        b.Events(),
				Sink:         h.LogSink(t),
				Log:          b.Log(h.LogConfig),
				Hourly:       b.Log(async.LogConfig{PollInterval: time.Hour, ResendInterval: time.Millisecond}),
				OtherProcess: h.OtherProcessLog,
			}
		})
	})
	t.Run("DataKeys", func(t *testing.T) {
		t.Parallel()
		keyringtest.Run(t, func(t *testing.T) keyringtest.Harness {
			b := open(t).Backend
			return keyringtest.Harness{Runner: b.Runner(nil), Store: b.DataKeys()}
		})
	})
	t.Run("MailBudgets", func(t *testing.T) {
		t.Parallel()
		budgettest.Run(t, f.MailBudgets, func(t *testing.T) budgettest.Harness {
			b := open(t).Backend
			return budgettest.Harness{Runner: runners(b), Store: b.MailBudgets(), Keys: keyringtest.New(t, b.DataKeys())}
		})
	})
	t.Run("UserViews", func(t *testing.T) {
		t.Parallel()
		viewstest.Run(t, func(t *testing.T) viewstest.Harness {
			h := open(t)
			b := h.Backend
			keys := keyringtest.New(t, b.DataKeys())
			return viewstest.Harness{
				Runner: runners(b),
				Events: b.Events(),
				Outbox: b.Outbox(),
				Keys:   keys,
				Views:  b.Views(),
				Tables: h.ViewTables,
			}
		})
	})
	t.Run("OrgViews", func(t *testing.T) {
		t.Parallel()
		orgviewstest.Run(t, func(t *testing.T) orgviewstest.Harness {
			b := open(t).Backend
			return orgviewstest.Harness{Runner: b.Runner(nil), Views: b.OrgViews(), Users: b.Views()}
		})
	})
}
