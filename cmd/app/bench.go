package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
)

// benchTopic is the topic of the benchmarks' messages; its handler does
// nothing but count, so the figures measure the outbox and the relay alone.
const benchTopic = "bench.noop"

// bench runs a benchmark against the backend DATABASE_URL selects, in a
// schema of its own on PostgreSQL or a temporary file on SQLite, which it
// removes afterwards, so it leaves no trace in the app's data. Each
// benchmark prints one summary line last.
func bench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("bench: want a benchmark: drain, latency or signin")
	}
	name, args := args[0], args[1:]
	fs := flag.NewFlagSet("bench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	messages := fs.Int("messages", 50000, "drain: messages to deliver")
	rate := fs.Int("rate", 200, "latency: messages committed per second, one per transaction")
	duration := fs.Duration("duration", 10*time.Second, "latency, signin: how long to send")
	concurrency := fs.Int("concurrency", 16, "signin: requests in flight at once")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the timed part to this file")
	holdXmin := fs.Bool("hold-xmin", false, "drain, latency, signin: hold PostgreSQL's xmin horizon for the whole run, as a long REPEATABLE READ transaction that has read something does")
	if err := fs.Parse(args); err != nil {
		return err
	}
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	d, err := parseDatabaseURL(e.cfg.DatabaseURL)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	db, drop, err := d.openScratch(ctx, e.log)
	if err != nil {
		return err
	}
	defer func() {
		if err := drop(context.WithoutCancel(ctx)); err != nil {
			e.log.Error("bench: clean up", "error", err)
		}
	}()
	if *holdXmin {
		release, err := holdXminHorizon(ctx, db)
		if err != nil {
			return err
		}
		defer release()
	}
	timed := func() (stop func()) { return func() {} }
	if *cpuprofile != "" {
		timed = func() func() { return profileCPU(*cpuprofile, e.log) }
	}
	cfg := e.cfg.Outbox
	fmt.Fprintf(stdout, "config: batch=%d interval=%s lease=%s timeout=%s max_attempts=%d\n",
		cfg.Batch, cfg.Interval, cfg.Lease, cfg.Timeout, cfg.MaxAttempts)
	switch name {
	case "drain":
		if *messages < 1 {
			return errors.New("bench drain: --messages must be at least 1")
		}
		return benchDrain(ctx, db, cfg, *messages, timed, stdout)
	case "latency":
		if *rate < 1 || *duration <= 0 {
			return errors.New("bench latency: --rate and --duration must be positive")
		}
		return benchLatency(ctx, db, cfg, *rate, *duration, timed, stdout)
	case "signin":
		if *concurrency < 1 || *duration <= 0 {
			return errors.New("bench signin: --concurrency and --duration must be positive")
		}
		return benchSignIn(ctx, e, db, *concurrency, *duration, timed, stdout)
	default:
		return fmt.Errorf("bench: unknown benchmark %q: want drain, latency or signin", name)
	}
}

// benchDrain fills the outbox with n messages, then times a relay with cfg
// until its handler has seen all of them, and checks that all were
// acknowledged.
func benchDrain(ctx context.Context, db backend, cfg outbox.RelayConfig, n int, timed func() func(), stdout io.Writer) error {
	store, runner := db.Outbox(), db.Runner(nil)
	const perTx = 1000
	for start := 0; start < n; start += perTx {
		err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			msgs := make([]outbox.Message, 0, perTx)
			for i := start; i < min(start+perTx, n); i++ {
				m, err := outbox.NewMessage(benchTopic, map[string]int{"seq": i}, tx.Now())
				if err != nil {
					return err
				}
				msgs = append(msgs, m)
			}
			return store.Add(ctx, tx, msgs...)
		})
		if err != nil {
			return fmt.Errorf("bench drain: fill: %w", err)
		}
	}
	var seen atomic.Int64
	done := make(chan struct{})
	relay, err := outbox.NewRelay(store, map[string]outbox.Handler{
		benchTopic: func(context.Context, outbox.Message) error {
			if seen.Add(1) == int64(n) {
				close(done)
			}
			return nil
		},
	}, cfg)
	if err != nil {
		return err
	}
	stopProfile := timed()
	began := time.Now()
	stop, ran := start(ctx, relay)
	defer stop()
	select {
	case <-done:
		stopProfile()
	case err := <-ran:
		return fmt.Errorf("bench drain: relay stopped after %d of %d messages: %v", seen.Load(), n, err)
	case <-ctx.Done():
		return fmt.Errorf("bench drain: %d of %d messages delivered: %w", seen.Load(), n, ctx.Err())
	}
	elapsed := time.Since(began)
	stop()
	if err := <-ran; err != nil {
		return err
	}
	left, err := store.Claim(ctx, time.Now().Add(24*time.Hour), time.Minute, n)
	if err != nil {
		return err
	}
	if len(left) > 0 || seen.Load() != int64(n) {
		return fmt.Errorf("bench drain: handler saw %d deliveries of %d messages, %d left unacknowledged", seen.Load(), n, len(left))
	}
	fmt.Fprintf(stdout, "drain: %d messages in %.2fs, %.0f msgs/s\n", n, elapsed.Seconds(), float64(n)/elapsed.Seconds())
	return nil
}

// benchLatency commits rate messages a second for d, each in its own
// transaction, on a schedule that does not wait for the relay, and measures
// for each the time from the moment its transaction asked to commit to the
// moment its handler ran.
func benchLatency(ctx context.Context, db backend, cfg outbox.RelayConfig, rate int, d time.Duration, timed func() func(), stdout io.Writer) error {
	store, runner := db.Outbox(), db.Runner(nil)
	n := int(d.Seconds() * float64(rate))
	n = max(n, 1)
	sent := make([]time.Time, n)
	received := make([]time.Time, n)
	var seen atomic.Int64
	done, warm := make(chan struct{}), make(chan struct{})
	var warmOnce sync.Once
	relay, err := outbox.NewRelay(store, map[string]outbox.Handler{
		benchTopic: func(_ context.Context, m outbox.Message) error {
			at := time.Now()
			var body struct{ Seq int }
			if err := json.Unmarshal(m.Payload, &body); err != nil {
				return err
			}
			if body.Seq < 0 {
				warmOnce.Do(func() { close(warm) })
				return nil
			}
			if m.Attempts == 1 {
				received[body.Seq] = at
				if seen.Add(1) == int64(n) {
					close(done)
				}
			}
			return nil
		},
	}, cfg)
	if err != nil {
		return err
	}
	stop, ran := start(ctx, relay)
	defer stop()

	send := func(seq int) error {
		return runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			m, err := outbox.NewMessage(benchTopic, map[string]int{"seq": seq}, tx.Now())
			if err != nil {
				return err
			}
			if err := store.Add(ctx, tx, m); err != nil {
				return err
			}
			if seq >= 0 {
				sent[seq] = time.Now()
			}
			return nil
		})
	}
	// One message first, so the relay is listening before timing starts.
	if err := send(-1); err != nil {
		return err
	}
	select {
	case <-warm:
	case <-ctx.Done():
		return fmt.Errorf("bench latency: warm-up: %w", ctx.Err())
	}

	var senders sync.WaitGroup
	errs := make(chan error, n)
	period := time.Second / time.Duration(rate)
	stopProfile := timed()
	defer stopProfile()
	began := time.Now()
	for i := range n {
		time.Sleep(time.Until(began.Add(time.Duration(i) * period)))
		senders.Go(func() {
			if err := send(i); err != nil {
				errs <- err
			}
		})
	}
	senders.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("bench latency: send: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("bench latency: %d of %d messages delivered: %w", seen.Load(), n, ctx.Err())
	}
	stop()
	if err := <-ran; err != nil {
		return err
	}
	lat := make([]time.Duration, n)
	for i := range n {
		lat[i] = received[i].Sub(sent[i])
	}
	slices.Sort(lat)
	fmt.Fprintf(stdout, "latency: rate=%d/s n=%d p50=%s p90=%s p99=%s max=%s\n",
		rate, n, percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99), ms(lat[n-1]))
	return nil
}

// percentile returns the p-th percentile of the sorted lat by nearest rank.
func percentile(lat []time.Duration, p float64) string {
	n := len(lat)
	i := int(math.Ceil(p*float64(n))) - 1
	return ms(lat[min(max(i, 0), n-1)])
}

// benchSignIn serves the HTTP API on loopback and has concurrency clients
// ask for sign-in links for distinct addresses for d, each request one unit
// of work with its events and its outbox message. The relay does not run,
// so the figure is the API's and its database's alone.
func benchSignIn(ctx context.Context, e env, db backend, concurrency int, d time.Duration, timed func() func(), stdout io.Writer) error {
	e.cfg.HTTPRateLimit = 0 // Every request comes from one client.
	srv, err := e.apiServer(db, nil)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/v1/sign-in-links"
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: concurrency},
	}
	defer client.CloseIdleConnections()

	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	stopProfile := timed()
	defer stopProfile()
	began := time.Now()
	until := began.Add(d)
	for w := range concurrency {
		wg.Go(func() {
			var mine []time.Duration
			for i := 0; time.Now().Before(until) && ctx.Err() == nil; i++ {
				body := fmt.Sprintf(`{"email":"bench-%d-%d@example.com"}`, w, i)
				start := time.Now()
				resp, err := client.Post(url, "application/json", strings.NewReader(body))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	stopProfile()
	if len(errs) > 0 {
		return fmt.Errorf("bench signin: %d requests failed, the first: %w", len(errs), errs[0])
	}
	if len(lat) == 0 {
		return errors.New("bench signin: no request completed")
	}
	slices.Sort(lat)
	fmt.Fprintf(stdout, "signin: %d requests in %.2fs, %.0f req/s, p50=%s p99=%s\n",
		len(lat), elapsed.Seconds(), float64(len(lat))/elapsed.Seconds(), percentile(lat, 0.50), percentile(lat, 0.99))
	return nil
}

// start runs relay until stop is called, and reports Run's error on ran.
func start(ctx context.Context, relay *outbox.Relay) (stop context.CancelFunc, ran <-chan error) {
	ctx, stop = context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- relay.Run(ctx) }()
	return stop, errc
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// profileCPU writes a CPU profile to path until the returned function is
// called.
func profileCPU(path string, log *slog.Logger) func() {
	f, err := os.Create(path)
	if err != nil {
		log.Error("bench: cpu profile", "error", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Error("bench: cpu profile", "error", err)
		_ = f.Close()
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}
}

// holdXminHorizon opens a REPEATABLE READ transaction on PostgreSQL that
// reads the outbox and stays open until the returned function is called, so
// that no row deleted or updated meanwhile can be vacuumed away: the worst
// case of a queue in a shared database.
func holdXminHorizon(ctx context.Context, db backend) (func(), error) {
	pg, ok := db.(postgresBackend)
	if !ok {
		return nil, errors.New("bench: --hold-xmin needs PostgreSQL")
	}
	tx, err := pg.db.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return nil, fmt.Errorf("bench: hold xmin: %w", err)
	}
	var n int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM outbox_messages`).Scan(&n); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("bench: hold xmin: %w", err)
	}
	return func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }, nil
}
