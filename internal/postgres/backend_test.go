package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/backend/backendtest"
	"github.com/eventsourced/accounts/internal/eventstore/eventstoretest"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/projections/async/logtest"
)

// logConfig is the log suite's: polls and resends every few milliseconds.
var logConfig = postgres.LogConfig{PollInterval: 5 * time.Millisecond, ResendInterval: time.Millisecond, AckDeadline: 500 * time.Millisecond, BatchSize: 10}

// TestBackend runs every conformance suite of the backend's ports on a
// fresh schema per case.
func TestBackend(t *testing.T) {
	t.Parallel()
	f := backendtest.Features{EventStore: eventstoretest.Features{ConcurrentWriters: true}}
	backendtest.Run(t, f, func(t *testing.T) backendtest.Harness {
		url := pgtest.NewURL(t)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		db, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return backendtest.Harness{
			Backend:   db,
			LogConfig: logConfig,
			LogSink:   func(t *testing.T) logtest.Sink { return newApplied(t, db) },
			OtherProcessLog: func(t *testing.T) (async.Log, func()) {
				other, proxy := pgtest.OpenBehindProxy(t, url)
				return other.Log(logConfig), proxy.Down
			},
			ViewTables: func(t *testing.T) map[string][]string { return snapshotUserViews(t, db) },
		}
	})
}
