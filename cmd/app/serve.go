package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/eventsourced/accounts/internal/admin"
	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
)

// serve runs the HTTP API, the relay and the asynchronous projections until
// ctx is done; API=false, RELAY=false or PROJECTIONS=false leaves a part to
// other instances.
//
// With SMTP_URL unset, the relay prints mail on stdout if it is a
// terminal, and serve does not start otherwise ([env.printMailOn]).
func serve(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	if e.cfg.Relay {
		if err := e.printMailOn(stdout); err != nil {
			return err
		}
	}
	if !e.cfg.API && !e.cfg.Relay && !e.cfg.Projections {
		return errors.New("API=false, RELAY=false and PROJECTIONS=false leave nothing to run")
	}
	stopTracing, err := e.startTracing(ctx, stderr)
	if err != nil {
		return err
	}
	defer stopTracing()
	db, keys, err := e.openWithKeys(ctx, e.openToServe)
	if err != nil {
		return err
	}
	var stopErr error
	defer func() {
		// What is still running past the grace may hold connections,
		// which closing the pool would wait for: the process ends anyway.
		if !errors.Is(stopErr, errGraceRanOut) {
			db.Close()
		}
	}()
	meter, metricsHandler, err := newMetrics(e.cfg.Tracing.Enabled())
	if err != nil {
		return err
	}
	defer func() { _ = meter.Shutdown(context.WithoutCancel(ctx)) }()

	// Build everything first, so that nothing runs when a part fails.
	var rel *configuredRelay
	if e.cfg.Relay {
		r, err := e.relay(db, keys, meter)
		if err != nil {
			return err
		}
		defer r.Close()
		rel = &r
	}
	var runner *async.Runner
	if e.cfg.Projections {
		if runner, err = async.NewRunner(db.Log(async.LogConfig{}), []projections.Projection{activity(db, keys)},
			async.WithRunnerLogger(e.log), async.WithRunnerMeter(meter), async.WithRunnerTracer(e.tracer)); err != nil {
			return err
		}
		defer runner.Close()
	}
	var srv, adminSrv *http.Server
	var ln, adminLn net.Listener
	closeListeners := func() {
		for _, l := range []net.Listener{ln, adminLn} {
			if l != nil {
				_ = l.Close()
			}
		}
	}
	// stopping is set once the stop begins: /readyz answers 503 from then.
	var stopping atomic.Bool
	if e.cfg.AdminAddr != "" {
		if adminLn, err = net.Listen("tcp", e.cfg.AdminAddr); err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		adminSrv = e.adminServer(metricsHandler, readiness(db, rel, &stopping))
		// The admin listener serves the metrics; the API's does not.
		metricsHandler = nil
	}
	if e.cfg.API {
		if ln, err = net.Listen("tcp", e.cfg.HTTPAddr); err != nil {
			closeListeners()
			return fmt.Errorf("http: %w", err)
		}
		if e.cfg.BaseURLFromAddr {
			// The port may have been 0: point the links at the one taken.
			e.cfg.BaseURL = config.BaseURLOf(ln.Addr().String())
		}
	}
	svcs, err := e.services(db, keys, meter)
	if err != nil {
		closeListeners()
		return err
	}
	if ln != nil {
		srv = e.apiServer(db, keys, svcs, rel, metricsHandler, meter, &stopping)
		api := srv.Handler
		srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if stopping.Load() {
				// Every answer now closes its connection, so that clients
				// reconnect, through the balancer, elsewhere. The server's
				// SetKeepAlivesEnabled(false) would instead close the idle
				// connections at once, and net/http may close one that has
				// just read a request it still carries out, whose client
				// then gets no answer (golang/go#65802).
				w.Header().Set("Connection", "close")
			}
			api.ServeHTTP(w, r)
		})
	}
	if ls, ok := db.Outbox().(outbox.Listener); ok && rel != nil && !ls.Listening() {
		e.log.Warn("relay: behind a transaction pooler without DATABASE_LISTEN_URL, messages committed by other instances wait for the next poll (outbox_wakeups_listening is 0)",
			"poll", e.cfg.Outbox.Interval)
	}

	// The parts run on a context of their own, which ends once the stop
	// begins: when ctx ends (SIGTERM, SIGINT) or a part fails.
	parts, stopParts := context.WithCancel(context.WithoutCancel(ctx))
	defer stopParts()
	var wg sync.WaitGroup
	// Each part sends at most one error, each HTTP server two.
	errs := make(chan error, 7)
	if runner != nil {
		wg.Go(func() {
			e.log.Info("projections running", "projections", "activity")
			if err := runner.Run(parts); err != nil {
				errs <- fmt.Errorf("projections: %w", err)
			}
			e.log.Info("projections stopped")
		})
	}
	if every := e.cfg.SweepInterval; every > 0 {
		wg.Go(func() { runSweeps(parts, every, e.log, e.sweeps(db, svcs)) })
	}
	if rel != nil {
		wg.Go(func() {
			e.log.Info("relay running", "batch", e.cfg.Outbox.Batch, "interval", e.cfg.Outbox.Interval,
				"integration", e.integrationEvents().Destinations)
			if err := rel.Run(parts); err != nil {
				errs <- fmt.Errorf("relay: %w", err)
			}
			e.log.Info("relay stopped")
		})
	}
	if srv != nil {
		e.log.Info("http listening", "addr", ln.Addr().String(), "base_url", e.cfg.BaseURL)
		wg.Go(func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("http: %w", err)
			}
		})
	}
	if adminSrv != nil {
		e.log.Info("admin listening", "addr", adminLn.Addr().String(), "pprof", e.cfg.AdminPprof)
		// Not one of the parts: it serves until they have stopped.
		go func() {
			if err := adminSrv.Serve(adminLn); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("admin: %w", err)
			}
		}()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	stopErr = e.stop(stopParts, &wg, errs, servers{api: srv, admin: adminSrv}, &stopping, first)
	return stopErr
}

// errGraceRanOut is the error of a stop that did not end within
// SHUTDOWN_GRACE.
var errGraceRanOut = errors.New("stop: SHUTDOWN_GRACE ran out")

// servers are the HTTP servers of serve; either may be nil.
type servers struct {
	api, admin *http.Server
}

// stop ends what serve runs within SHUTDOWN_GRACE: /readyz answers 503 at
// once; the API serves for SHUTDOWN_DELAY more, then closes its listener
// and lets the requests in flight finish; the relay claims nothing more,
// and its deliveries in flight finish or, shortly before the grace runs
// out, are released ([relay.WithStopGrace]); the projections' batch in
// flight commits or rolls back whole, in its transaction. The admin
// listener serves until all of that has stopped, so that the stop can be
// watched, and closes last. It returns first, the error that made serve
// stop, with those of the parts (errs) as they stopped, or an error when
// the grace ran out before everything had stopped.
func (e env) stop(stopParts context.CancelFunc, wg *sync.WaitGroup, errs chan error, srvs servers, stopping *atomic.Bool, first error) error {
	srv := srvs.api
	grace := e.cfg.ShutdownGrace
	deadline := time.Now().Add(grace)
	stopping.Store(true)
	e.log.Info("stopping", "grace", grace, "delay", e.cfg.ShutdownDelay)
	stopParts()
	var httpDone sync.WaitGroup
	if srv != nil {
		httpDone.Go(func() {
			if d := e.cfg.ShutdownDelay; d > 0 {
				time.Sleep(d)
			}
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			e.log.Info("http closing its listener; requests in flight finish")
			if err := srv.Shutdown(ctx); err != nil {
				errs <- fmt.Errorf("http: requests still in flight at the end of SHUTDOWN_GRACE: %w", err)
				_ = srv.Close()
			}
			e.log.Info("http stopped")
		})
	}
	done := make(chan struct{})
	go func() {
		httpDone.Wait()
		wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		if srvs.admin != nil {
			_ = srvs.admin.Close()
		}
		return errors.Join(first, fmt.Errorf("%w (%s) before every part had stopped; what was in flight is due again once its lease ends", errGraceRanOut, grace))
	}
	if srvs.admin != nil {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := srvs.admin.Shutdown(ctx)
		cancel()
		if err != nil {
			// A profile or trace still streaming is cut short.
			_ = srvs.admin.Close()
		}
		e.log.Info("admin stopped")
	}
	all := []error{first}
	for len(errs) > 0 {
		all = append(all, <-errs)
	}
	err := errors.Join(all...)
	if err == nil {
		e.log.Info("stopped")
	}
	return err
}

// apiServer returns the HTTP server of the API, with timeouts on every
// stage of a request. It is ready while the database answers and rel, the
// relay of this process if any, can claim messages, until stopping, when
// not nil, is set.
// A nil metrics leaves /metrics out.
func (e env) apiServer(db backend.Backend, keys *keyring.Keyring, svcs services, rel *configuredRelay, metrics http.Handler, meter metric.MeterProvider, stopping *atomic.Bool) *http.Server {
	return &http.Server{
		Handler: httpapi.NewServer(httpapi.Deps{
			Users:          svcs.users,
			Orgs:           svcs.orgs,
			Activity:       activity(db, keys),
			Ready:          readiness(db, rel, stopping),
			Metrics:        metrics,
			Log:            e.log,
			RateLimit:      e.cfg.HTTPRateLimit,
			TrustedProxies: e.cfg.TrustedProxies,
			BaseURL:        e.cfg.BaseURL,
			Meter:          meter.Meter("github.com/eventsourced/accounts/internal/httpapi"),
			TracerProvider: e.tracer,
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
	}
}

// readiness reports whether this process can serve: nil while the
// database answers and rel, the relay of this process if any, can claim
// messages, until stopping, when not nil, is set.
func readiness(db backend.Backend, rel *configuredRelay, stopping *atomic.Bool) func(context.Context) error {
	return func(ctx context.Context) error {
		if stopping != nil && stopping.Load() {
			return httpapi.ErrStopping
		}
		if err := db.Ping(ctx); err != nil {
			return err
		}
		if rel != nil {
			return rel.Ready()
		}
		return nil
	}
}

// adminServer returns the HTTP server of the admin listener: metrics, the
// probes on ready, and the profiler when ADMIN_PPROF asks for it.
func (e env) adminServer(metrics http.Handler, ready func(context.Context) error) *http.Server {
	return &http.Server{
		Handler: admin.NewHandler(admin.Deps{
			Metrics: metrics,
			Health:  httpapi.Health(),
			Ready:   httpapi.Ready(ready, e.log),
			Pprof:   e.cfg.AdminPprof,
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// No WriteTimeout: a CPU profile or an execution trace streams for
		// as long as its ?seconds= asks, and pprof refuses one longer than
		// the timeout.
		IdleTimeout: 60 * time.Second,
		ErrorLog:    slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
	}
}
