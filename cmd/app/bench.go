package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/bench"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/telemetry"
)

// benchOptions are the flags of the benchmarks.
type benchOptions struct {
	messages, rate, events, batch, concurrency, users int
	catchUp, samples, orgs                            int
	duration, poll, timeout                           time.Duration
	lag, holdXmin, traceSink, closedLoop              bool
	profiles                                          bench.Profiles
}

// runBench runs the benchmark name ([bench]) against the backend
// DATABASE_URL selects, in a schema of its own on PostgreSQL or a
// temporary file on SQLite, which it removes afterwards, so it leaves no
// trace in the app's data.
//
// The options are the flags of `app bench NAME`; each benchmark reads
// those it has.
func runBench(ctx context.Context, name string, o benchOptions, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	// Before the database, which takes e.tracer for its statements.
	stopTracing, err := e.benchTracing(ctx, o.traceSink)
	if err != nil {
		return err
	}
	defer stopTracing()
	d, err := e.database()
	if err != nil {
		return err
	}
	if name == "growth" {
		return e.benchGrowth(ctx, d, o, bench.Bench{Relay: e.cfg.Outbox, Out: stdout,
			Timed: bench.Timed(name, o.profiles, stderr, e.log), Logger: e.log, TracerProvider: e.tracer}, stderr)
	}
	db, drop, err := d.openScratch(ctx, e.log)
	if err != nil {
		return err
	}
	defer func() {
		if err := drop(context.WithoutCancel(ctx)); err != nil {
			e.log.Error("bench: clean up", "error", err)
		}
	}()
	if o.holdXmin {
		pg, ok := db.(*postgres.DB)
		if !ok {
			return errors.New("bench: --hold-xmin needs PostgreSQL")
		}
		release, err := bench.HoldXminHorizon(ctx, pg.Pool())
		if err != nil {
			return err
		}
		defer release()
	}
	b := bench.Bench{
		Runner:         db.Runner(nil),
		Outbox:         db.Outbox(),
		Events:         db.Events(),
		Relay:          e.cfg.Outbox,
		Out:            stdout,
		Timed:          bench.Timed(name, o.profiles, stderr, e.log),
		Logger:         e.log,
		TracerProvider: e.tracer,
	}
	cfg := e.cfg.Outbox
	if name == "projection" {
		if o.poll < 0 || o.batch < 0 {
			return errors.New("bench projection: --poll and --batch must not be negative")
		}
		p := "backend default"
		if o.poll > 0 {
			p = o.poll.String()
		}
		bt := "backend default"
		if o.batch > 0 {
			bt = strconv.Itoa(o.batch)
		}
		fmt.Fprintf(stdout, "config: poll=%s batch=%s\n", p, bt)
	} else {
		fmt.Fprintf(stdout, "config: batch=%d interval=%s lease=%s timeout=%s max_attempts=%d\n",
			cfg.Batch, cfg.Interval, cfg.Lease, cfg.Timeout, cfg.MaxAttempts)
	}
	switch name {
	case "drain":
		if o.messages < 1 {
			return errors.New("bench drain: --messages must be at least 1")
		}
		return b.Drain(ctx, o.messages)
	case "latency":
		if o.rate < 1 || o.duration <= 0 {
			return errors.New("bench latency: --rate and --duration must be positive")
		}
		load := bench.OpenLoop
		if o.closedLoop {
			load = bench.ClosedLoop
		}
		return b.Latency(ctx, o.rate, o.duration, load)
	case "signin":
		if o.concurrency < 1 || o.duration <= 0 {
			return errors.New("bench signin: --concurrency and --duration must be positive")
		}
		e.cfg.HTTPRateLimit = 0 // Every request comes from one client.
		// The API logs each request at info; the benchmark measures
		// serving them, not writing a line for each.
		e.log = slog.New(slog.DiscardHandler)
		keys, err := e.benchKeyring(ctx, db)
		if err != nil {
			return err
		}
		svcs, err := e.services(db, keys, nil)
		if err != nil {
			return err
		}
		return b.SignIn(ctx, e.apiServer(db, keys, svcs, nil, nil, noop.NewMeterProvider(), nil), o.concurrency, o.duration)
	case "invite":
		if o.concurrency < 1 || o.duration <= 0 || o.orgs < 1 {
			return errors.New("bench invite: --concurrency, --duration and --orgs must be positive")
		}
		return e.benchInvite(ctx, db, b, stderr, o)
	case "publish":
		if o.messages < 1 || o.users < 1 {
			return errors.New("bench publish: --messages and --users must be at least 1")
		}
		pubs, err := e.publishers()
		if err != nil {
			return err
		}
		defer pubs.Close()
		return b.Publish(ctx, bench.Publishing{Events: e.integrationEvents(), Handlers: pubs.handlers,
			Options: []relay.Option{e.publishPolicy(pubs)}}, o.messages, o.users)
	case "projection":
		b.EventLog = db.Log(async.LogConfig{PollInterval: o.poll, BatchSize: o.batch})
		if o.lag {
			if o.rate < 1 || o.duration <= 0 {
				return errors.New("bench projection --lag: --rate and --duration must be positive")
			}
			// Sign-ins carry no address: nothing is sealed or opened.
			return b.ProjectionLag(ctx, activity(db, nil), o.rate, o.duration)
		}
		if o.events < 1 {
			return errors.New("bench projection: --events must be at least 1")
		}
		keys, err := e.benchKeyring(ctx, db)
		if err != nil {
			return err
		}
		return b.Projection(ctx, activity(db, keys), keys, o.events)
	default:
		return fmt.Errorf("bench: unknown benchmark %q: want drain, latency, signin, invite, projection, publish or growth", name)
	}
}

// benchInvite runs [bench.Bench.Invite] on db: the API as the sign-in
// benchmark serves it, and the relay of the running configuration, whose
// mail goes to a [bench.MailSink] in this process. Each organization
// sends the invitations the domain's policy allows it in its window, so
// that the run measures the service as it is configured.
func (e *env) benchInvite(ctx context.Context, db backend.Backend, b bench.Bench, stderr io.Writer, o benchOptions) error {
	e.cfg.HTTPRateLimit = 0 // Every request comes from one client.
	// The API logs each request at info, and the relay each delivery; the
	// benchmark measures serving them, not writing a line for each, and
	// keeps what goes wrong.
	e.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sink, err := bench.StartMailSink()
	if err != nil {
		return err
	}
	defer func() { _ = sink.Close() }()
	e.cfg.SMTPURL = sink.URL
	keys, err := e.benchKeyring(ctx, db)
	if err != nil {
		return err
	}
	svcs, err := e.services(db, keys, nil)
	if err != nil {
		return err
	}
	meter := noop.NewMeterProvider()
	rel, err := e.relay(db, keys, meter)
	if err != nil {
		return err
	}
	defer func() { _ = rel.Close() }()
	return b.Invite(ctx, e.apiServer(db, keys, svcs, &rel, nil, meter, nil), rel.Run, sink, bench.InviteConfig{
		Concurrency:   o.concurrency,
		Duration:      o.duration,
		Organizations: o.orgs,
		// The policy that env.services gives the organizations: each
		// organization has an owner of its own, who sends no more than
		// either limit allows.
		PerOrganization: min(org.Policy(e.cfg.OrgPolicy).WithDefaults().InvitationLimit, org.Policy(e.cfg.OrgPolicy).WithDefaults().InvitationAccountLimit),
	})
}

// benchTracing starts tracing as the OTEL_ variables say, or, with sink,
// to a [bench.TraceSink] whose count of exports is logged at the end.
// Every part the benchmark builds takes e.tracer: nothing global changes.
func (e *env) benchTracing(ctx context.Context, sink bool) (stop func(), err error) {
	if !sink {
		_, stop, err := e.buildTracing(ctx, telemetry.Options{})
		return stop, err
	}
	s, err := bench.StartTraceSink()
	if err != nil {
		return nil, err
	}
	e.cfg.Tracing.Exporter = telemetry.ExporterOTLP
	// Options.TracesURL sends the spans there; the configuration says so
	// too, for the "tracing on" line.
	e.cfg.Tracing.TracesProtocol, e.cfg.Tracing.TracesEndpoint = telemetry.ProtocolHTTP, s.URL
	log := e.log // The sign-in benchmark discards e.log's lines later.
	_, stopTracing, err := e.buildTracing(ctx, telemetry.Options{TracesURL: s.URL})
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return func() {
		stopTracing()
		exports, bytes, spans := s.Received()
		log.Info("trace sink", "exports", exports, "bytes", bytes, "spans", spans)
		_ = s.Close()
	}, nil
}

// benchKeyring returns the keyring of DATA_KEY, or, without it, of a master
// key made for the run: the benchmark's database goes with it.
func (e env) benchKeyring(ctx context.Context, db backend.Backend) (*keyring.Keyring, error) {
	if e.cfg.DataKey != "" {
		return e.keyring(ctx, db)
	}
	value, err := keyring.NewMasterKey("bench")
	if err != nil {
		return nil, err
	}
	masters, err := keyring.ParseMasters(value)
	if err != nil {
		return nil, err
	}
	return keyring.New(masters, db.DataKeys())
}
