package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/eventsourced/accounts/internal/bench"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/user"
)

// benchGrowth runs `app bench growth` ([bench.Bench.Growth]) on two
// scratch databases of the kind d names, one after the other: an empty one,
// and one it fills with the history. It loads with COPY on PostgreSQL, in
// two units of work at once, and with multi-row INSERTs on SQLite, whose
// one writer takes them in turn.
func (e env) benchGrowth(ctx context.Context, d database, o benchOptions, b bench.Bench, stderr io.Writer) error {
	e.cfg.HTTPRateLimit = 0 // Every request comes from one client.
	// The API logs each request at info; the benchmark measures serving
	// them, not writing a line for each.
	apiEnv := e
	apiEnv.log = slog.New(slog.DiscardHandler)
	open := func(ctx context.Context) (bench.GrowthDB, func(context.Context) error, error) {
		db, drop, err := d.openScratch(ctx, e.log)
		if err != nil {
			return bench.GrowthDB{}, nil, err
		}
		keys, err := e.benchKeyring(ctx, db)
		if err != nil {
			return bench.GrowthDB{}, nil, joinDrop(ctx, err, drop)
		}
		g := bench.GrowthDB{
			Stores:   bench.Bench{Runner: db.Runner(nil), Outbox: db.Outbox(), Events: db.Events(), EventLog: db.Log(async.LogConfig{})},
			Keys:     keys,
			Activity: activity(db, keys),
			Views:    user.ViewsProjection{Views: db.Views(), Keys: keys},
			API: func() (*http.Server, error) {
				svcs, err := apiEnv.services(db, keys, nil)
				if err != nil {
					return nil, err
				}
				return apiEnv.apiServer(db, keys, svcs, nil, nil, noop.NewMeterProvider(), nil), nil
			},
		}
		switch db := db.(type) {
		case *postgres.DB:
			g.Load, g.Writers, g.Size = postgres.LoadEvents, 2, db.EventsSize
			g.Settle = func(ctx context.Context) error { return settle(ctx, db, e.log) }
		case *sqlite.DB:
			g.Load, g.Writers, g.Size = sqlite.LoadEvents, 1, db.EventsSize
		}
		return g, drop, nil
	}
	return b.Growth(ctx, bench.GrowthConfig{
		Events: o.events, Concurrency: o.concurrency, SignIn: o.duration,
		Messages: o.messages, CatchUp: o.catchUp, Samples: o.samples,
	}, open)
}

// settle vacuums and analyzes the events, as autovacuum would in time
// (statistics for the planner, events_position's ranges summarized), and
// takes a checkpoint, so that both databases start their figures with no
// dirty page to write; a role that may not take a checkpoint goes on
// without one.
func settle(ctx context.Context, db *postgres.DB, log *slog.Logger) error {
	if err := db.Vacuum(ctx); err != nil {
		return err
	}
	if _, err := db.Pool().Exec(ctx, `CHECKPOINT`); err != nil {
		log.Warn("bench growth: no checkpoint", "error", err)
	}
	return nil
}

// joinDrop drops a scratch database after err.
func joinDrop(ctx context.Context, err error, drop func(context.Context) error) error {
	if derr := drop(context.WithoutCancel(ctx)); derr != nil {
		return errors.Join(err, derr)
	}
	return err
}
