package sqlite_test

import (
	"testing"

	"github.com/eventsourced/accounts/internal/backend/backendtest"
	"github.com/eventsourced/accounts/internal/eventstore/eventstoretest"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/projections/async/logtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/user/mail/budgettest"
)

// TestBackend runs every conformance suite of the backend's ports on a
// fresh file per case.
func TestBackend(t *testing.T) {
	t.Parallel()
	// SQLite has one writer at a time: a unit of work cannot stay open
	// while another commits, and no transaction can be in flight behind a
	// committed one, so the cases that need that are skipped.
	f := backendtest.Features{
		EventStore:  eventstoretest.Features{ConcurrentWriters: false},
		Log:         logtest.Features{SerialWriters: true},
		MailBudgets: budgettest.Features{SerialWriters: true},
	}
	backendtest.Run(t, f, func(t *testing.T) backendtest.Harness {
		db := sqlitetest.New(t)
		return backendtest.Harness{
			Backend:   db,
			LogConfig: logConfig,
			LogSink:   func(t *testing.T) logtest.Sink { return newLogSink(t, db) },
			OtherProcessLog: func(t *testing.T) (async.Log, func()) {
				return sqlite.OtherProcessLog(t, db, logConfig)
			},
			ViewTables: func(t *testing.T) map[string][]string { return snapshotUserViews(t, db) },
		}
	})
}
