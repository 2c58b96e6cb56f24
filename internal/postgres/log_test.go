package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/logtest"
)

// logConfig is the suite's: polls and resends every few milliseconds.
var logConfig = postgres.LogConfig{PollInterval: 5 * time.Millisecond, ResendInterval: time.Millisecond, AckDeadline: 500 * time.Millisecond, BatchSize: 10}

func TestLog(t *testing.T) {
	logtest.Run(t, logtest.Features{}, func(t *testing.T) logtest.Harness {
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
		log := db.Log(logConfig)
		return logtest.Harness{
			Runner: db.Runner(nil),
			Store:  db.Events(),
			Sink:   newApplied(t, db),
			Log:    log,
			Hourly: db.Log(postgres.LogConfig{PollInterval: time.Hour, ResendInterval: time.Millisecond}),
			OtherProcess: func(t *testing.T) (projections.Log, func()) {
				other, proxy := pgtest.OpenBehindProxy(t, url)
				l := other.Log(logConfig)
				return l, proxy.Down
			},
		}
	})
}
