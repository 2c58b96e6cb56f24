package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/metric/noop"
	"golang.org/x/term"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// benchTopic is the topic of the benchmarks' messages; its handler does
// nothing but count, so the figures measure the outbox and the relay alone.
const benchTopic = "bench.noop"

// benchOptions are the flags of the benchmarks.
type benchOptions struct {
	messages, rate, events, batch, concurrency, users int
	duration, poll, timeout                           time.Duration
	lag, holdXmin, comparePlain                       bool
	cpuprofile                                        string
}

// bench runs a benchmark against the backend DATABASE_URL selects, in a
// schema of its own on PostgreSQL or a temporary file on SQLite, which it
// removes afterwards, so it leaves no trace in the app's data. Each
// benchmark prints one summary line last.
//
// The options are the flags of `app bench NAME`; each benchmark reads
// those it has.
func bench(ctx context.Context, name string, o benchOptions, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	d, err := e.database()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
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
	if o.holdXmin {
		release, err := holdXminHorizon(ctx, db)
		if err != nil {
			return err
		}
		defer release()
	}
	// timed starts the timed part of a benchmark, whose progress count
	// tells: it profiles it (--cpuprofile) and, on a terminal, shows a
	// progress line, until the returned function is called.
	timed := func(count func() int64) (stop func()) {
		stopProfile := func() {}
		if o.cpuprofile != "" {
			stopProfile = profileCPU(o.cpuprofile, e.log)
		}
		stopProgress := showProgress(stderr, name, count)
		var once sync.Once
		return func() { once.Do(func() { stopProgress(); stopProfile() }) }
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
		b := "backend default"
		if o.batch > 0 {
			b = strconv.Itoa(o.batch)
		}
		fmt.Fprintf(stdout, "config: poll=%s batch=%s\n", p, b)
	} else {
		fmt.Fprintf(stdout, "config: batch=%d interval=%s lease=%s timeout=%s max_attempts=%d\n",
			cfg.Batch, cfg.Interval, cfg.Lease, cfg.Timeout, cfg.MaxAttempts)
	}
	switch name {
	case "drain":
		if o.messages < 1 {
			return errors.New("bench drain: --messages must be at least 1")
		}
		return benchDrain(ctx, db, cfg, o.messages, timed, stdout)
	case "latency":
		if o.rate < 1 || o.duration <= 0 {
			return errors.New("bench latency: --rate and --duration must be positive")
		}
		return benchLatency(ctx, db, cfg, o.rate, o.duration, timed, stdout)
	case "signin":
		if o.concurrency < 1 || o.duration <= 0 {
			return errors.New("bench signin: --concurrency and --duration must be positive")
		}
		return benchSignIn(ctx, e, db, o.concurrency, o.duration, o.comparePlain, timed, stdout)
	case "publish":
		if o.messages < 1 || o.users < 1 {
			return errors.New("bench publish: --messages and --users must be at least 1")
		}
		return benchPublish(ctx, e, db, cfg, o.messages, o.users, timed, stdout)
	case "projection":
		log := db.Log(projections.LogConfig{PollInterval: o.poll, BatchSize: o.batch})
		if o.lag {
			if o.rate < 1 || o.duration <= 0 {
				return errors.New("bench projection --lag: --rate and --duration must be positive")
			}
			return benchProjectionLag(ctx, e, db, log, o.rate, o.duration, timed, stdout)
		}
		if o.events < 1 {
			return errors.New("bench projection: --events must be at least 1")
		}
		return benchProjection(ctx, e, db, log, o.events, timed, stdout)
	default:
		return fmt.Errorf("bench: unknown benchmark %q: want drain, latency, signin, projection or publish", name)
	}
}

// benchDrain fills the outbox with n messages, then times a relay with cfg
// until its handler has seen all of them, and checks that all were
// acknowledged.
func benchDrain(ctx context.Context, db backend, cfg outbox.RelayConfig, n int, timed func(func() int64) func(), stdout io.Writer) error {
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
	elapsed, err := runUntilDone(ctx, "bench drain", store, relay, done, &seen, n, timed)
	if cut := (*cutShortError)(nil); errors.As(err, &cut) {
		fmt.Fprintf(stdout, "drain: %d messages in %.2fs, %.0f msgs/s (cut short: %d of %d)\n",
			cut.done, elapsed.Seconds(), float64(cut.done)/elapsed.Seconds(), cut.done, n)
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "drain: %d messages in %.2fs, %.0f msgs/s\n", n, elapsed.Seconds(), float64(n)/elapsed.Seconds())
	return nil
}

// showProgress writes, once a second while the timed part runs and only
// when w is a terminal, a line that says how far the benchmark has come,
// and clears it when the returned function is called.
func showProgress(w io.Writer, name string, count func() int64) (stop func()) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(f, "\r\033[K")
				return
			case <-tick.C:
				n, secs := count(), time.Since(began).Seconds()
				fmt.Fprintf(f, "\r\033[K%s: %d in %.0fs, %.0f/s", name, n, secs, float64(n)/secs)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// cutShortError is a benchmark that ctx ended (Ctrl-C or --timeout) before
// it was done; its partial summary line is still printed.
type cutShortError struct {
	name     string
	done, of int64
	err      error
}

func (e *cutShortError) Error() string {
	if e.of == 0 {
		return fmt.Sprintf("%s: cut short after %d: %v", e.name, e.done, e.err)
	}
	return fmt.Sprintf("%s: cut short after %d of %d: %v", e.name, e.done, e.of, e.err)
}

func (e *cutShortError) Unwrap() error { return e.err }

// runUntilDone runs relay until done is closed, timing it, then stops it
// and checks that it left none of the n messages unacknowledged and that
// seen, its handlers' count of deliveries, reached n.
//
// When ctx ends first, it returns the time until then and a
// [*cutShortError].
func runUntilDone(ctx context.Context, name string, store outbox.Store, relay *outbox.Relay, done <-chan struct{}, seen *atomic.Int64, n int, timed func(func() int64) func()) (time.Duration, error) {
	stopProfile := timed(seen.Load)
	began := time.Now()
	stop, ran := start(ctx, relay)
	defer stop()
	select {
	case <-done:
		stopProfile()
	case err := <-ran:
		return 0, fmt.Errorf("%s: relay stopped after %d of %d messages: %v", name, seen.Load(), n, err)
	case <-ctx.Done():
		stopProfile()
		elapsed := time.Since(began)
		stop()
		<-ran
		return elapsed, &cutShortError{name: name, done: seen.Load(), of: int64(n), err: ctx.Err()}
	}
	elapsed := time.Since(began)
	stop()
	if err := <-ran; err != nil {
		return 0, err
	}
	left, err := store.Claim(ctx, time.Now().Add(24*time.Hour), time.Minute, n)
	if err != nil {
		return 0, err
	}
	if len(left) > 0 || seen.Load() != int64(n) {
		return 0, fmt.Errorf("%s: handlers saw %d deliveries of %d messages, %d left unacknowledged", name, seen.Load(), n, len(left))
	}
	return elapsed, nil
}

// benchLatency commits rate messages a second for d, each in its own
// transaction, on a schedule that does not wait for the relay, and measures
// for each the time from the moment its transaction asked to commit to the
// moment its handler ran.
func benchLatency(ctx context.Context, db backend, cfg outbox.RelayConfig, rate int, d time.Duration, timed func(func() int64) func(), stdout io.Writer) error {
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

	stopProfile := timed(seen.Load)
	defer stopProfile()
	var cut error
	if err := paced(ctx, n, rate, send); err != nil {
		if ctx.Err() == nil {
			return fmt.Errorf("bench latency: send: %w", err)
		}
		cut = ctx.Err()
	}
	if cut == nil {
		select {
		case <-done:
		case <-ctx.Done():
			cut = ctx.Err()
		}
	}
	stop()
	if err := <-ran; err != nil && cut == nil {
		return err
	}
	stopProfile()
	// The relay has stopped: what its handlers wrote is all there is.
	var lat []time.Duration
	for i := range n {
		if !sent[i].IsZero() && !received[i].IsZero() {
			lat = append(lat, received[i].Sub(sent[i]))
		}
	}
	if len(lat) == 0 {
		if cut != nil {
			fmt.Fprintf(stdout, "latency: rate=%d/s n=0 (cut short: 0 of %d)\n", rate, n)
			return &cutShortError{name: "bench latency", of: int64(n), err: cut}
		}
		return errors.New("bench latency: nothing was delivered")
	}
	slices.Sort(lat)
	line := fmt.Sprintf("latency: rate=%d/s n=%d p50=%s p90=%s p99=%s max=%s",
		rate, len(lat), percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99), ms(lat[len(lat)-1]))
	if cut != nil {
		fmt.Fprintf(stdout, "%s (cut short: %d of %d)\n", line, len(lat), n)
		return &cutShortError{name: "bench latency", done: int64(len(lat)), of: int64(n), err: cut}
	}
	fmt.Fprintln(stdout, line)
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
//
// With comparePlain it also serves a second API whose service writes the
// addresses unsealed ([user.Deps]), and measures both in turn, sealed,
// plain, plain, sealed, each for d, so that neither gains from going
// first on a database that grows: the two figures of one run tell what
// sealing costs.
func benchSignIn(ctx context.Context, e env, db backend, concurrency int, d time.Duration, comparePlain bool, timed func(func() int64) func(), stdout io.Writer) error {
	e.cfg.HTTPRateLimit = 0 // Every request comes from one client.
	// The API logs each request at info; the benchmark measures serving
	// them, not writing a line for each.
	e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	keys, err := e.benchKeyring(db)
	if err != nil {
		return err
	}
	serve := func(keys *keyring.Keyring) (string, func(), error) {
		users, err := e.users(db, keys)
		if err != nil {
			return "", nil, err
		}
		srv := e.apiServer(db, keys, users, nil, nil, noop.NewMeterProvider(), nil)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		go func() { _ = srv.Serve(ln) }()
		return "http://" + ln.Addr().String() + "/v1/sign-in-links", func() { _ = srv.Close() }, nil
	}
	sealedURL, closeSealed, err := serve(keys)
	if err != nil {
		return err
	}
	defer closeSealed()
	if !comparePlain {
		r := signInRound(ctx, sealedURL, "s", concurrency, d, timed)
		return r.report(stdout, "signin", d)
	}
	plainURL, closePlain, err := serve(nil)
	if err != nil {
		return err
	}
	defer closePlain()
	var sealed, plain signInResult
	for i, round := range []struct {
		url  string
		into *signInResult
	}{{sealedURL, &sealed}, {plainURL, &plain}, {plainURL, &plain}, {sealedURL, &sealed}} {
		r := signInRound(ctx, round.url, strconv.Itoa(i), concurrency, d, timed)
		round.into.add(r)
		if r.err != nil || ctx.Err() != nil {
			break
		}
	}
	if err := sealed.report(stdout, "signin sealed", 2*d); err != nil {
		return err
	}
	if err := plain.report(stdout, "signin plain", 2*d); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "signin: sealed %.0f req/s, plain %.0f req/s: sealing costs %.1f%% of the throughput, p99 %s vs %s\n",
		sealed.rate(), plain.rate(), 100*(1-sealed.rate()/plain.rate()), sealed.p99(), plain.p99())
	return err
}

// benchKeyring returns the keyring of DATA_KEY, or, without it, of a master
// key made for the run: the benchmark's database goes with it.
func (e env) benchKeyring(db backend) (*keyring.Keyring, error) {
	if e.cfg.DataKey != "" {
		return e.keyring(db)
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

// signInResult is what rounds of the sign-in benchmark measured.
type signInResult struct {
	lat     []time.Duration
	elapsed time.Duration
	err     error
	cut     error
}

func (r *signInResult) add(o signInResult) {
	r.lat = append(r.lat, o.lat...)
	r.elapsed += o.elapsed
	r.err = cmp.Or(r.err, o.err)
	r.cut = cmp.Or(r.cut, o.cut)
}

func (r signInResult) rate() float64 { return float64(len(r.lat)) / r.elapsed.Seconds() }

func (r signInResult) p99() string {
	lat := slices.Sorted(slices.Values(r.lat))
	return percentile(lat, 0.99)
}

// report prints the summary line of r, named name, for rounds meant to
// last d in all, or returns why there is none.
func (r signInResult) report(stdout io.Writer, name string, d time.Duration) error {
	if r.err != nil {
		return fmt.Errorf("bench %s: %w", name, r.err)
	}
	if len(r.lat) == 0 {
		if r.cut != nil {
			fmt.Fprintf(stdout, "%s: 0 requests in %.2fs (cut short)\n", name, r.elapsed.Seconds())
			return &cutShortError{name: "bench " + name, err: r.cut}
		}
		return fmt.Errorf("bench %s: no request completed", name)
	}
	lat := slices.Sorted(slices.Values(r.lat))
	line := fmt.Sprintf("%s: %d requests in %.2fs, %.0f req/s, p50=%s p99=%s",
		name, len(lat), r.elapsed.Seconds(), r.rate(), percentile(lat, 0.50), percentile(lat, 0.99))
	if r.cut != nil && r.elapsed < d {
		fmt.Fprintf(stdout, "%s (cut short: %.1fs of %s)\n", line, r.elapsed.Seconds(), d)
		return &cutShortError{name: "bench " + name, done: int64(len(lat)), err: r.cut}
	}
	_, err := fmt.Fprintln(stdout, line)
	return err
}

// signInRound has concurrency clients ask url for sign-in links for d, for
// addresses that round makes distinct from other rounds'.
func signInRound(ctx context.Context, url, round string, concurrency int, d time.Duration, timed func(func() int64) func()) signInResult {
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
		done atomic.Int64
	)
	stopProfile := timed(done.Load)
	defer stopProfile()
	began := time.Now()
	until := began.Add(d)
	for w := range concurrency {
		wg.Go(func() {
			var mine []time.Duration
			for i := 0; time.Now().Before(until) && ctx.Err() == nil; i++ {
				body := fmt.Sprintf(`{"email":"bench-%s-%d-%d@example.com"}`, round, w, i)
				start := time.Now()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil && ctx.Err() != nil {
					break // Cut short: this request does not count.
				}
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
				done.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r := signInResult{lat: lat, elapsed: time.Since(began), cut: ctx.Err()}
	if len(errs) > 0 {
		r.err = fmt.Errorf("%d requests failed, the first: %w", len(errs), errs[0])
	}
	return r
}

// benchUsers is how many accounts the projection benchmark's events are
// spread over, so that the activity table grows as it does in use: many
// accounts, each with a history.
const benchUsers = 300

// activityEvent returns the k-th event of account id's history as the
// activity projection reads it, its address sealed with keys as part of tx: its registration, then sign-ins,
// sign-outs, and changes of address asked for and confirmed, in turn; i
// makes its secrets distinct.
func activityEvent(ctx context.Context, tx uow.Tx, keys *keyring.Keyring, id uuid.UUID, k, i int) (eventstore.Event, error) {
	now := tx.Now()
	hash := fmt.Sprintf("%064x", i)
	var typ string
	var data any
	switch k % 4 {
	case 1:
		typ, data = user.TypeSessionStarted, user.SessionStarted{UserID: id, TokenHash: hash, ExpiresAt: now.Add(30 * 24 * time.Hour)}
	case 2:
		typ, data = user.TypeSessionEnded, user.SessionEnded{UserID: id, TokenHash: hash}
	default:
		email, err := keys.Seal(ctx, tx, "user-"+id.String(), fmt.Sprintf("bench-%d@example.com", i))
		if err != nil {
			return eventstore.Event{}, err
		}
		switch {
		case k == 0:
			typ, data = user.TypeRegistered, user.Registered{UserID: id, Email: email}
		case k%4 == 3:
			typ, data = user.TypeEmailChangeRequested, user.EmailChangeRequested{UserID: id, NewEmail: email, CodeHash: hash, ExpiresAt: now.Add(time.Hour)}
		default:
			typ, data = user.TypeEmailChanged, user.EmailChanged{UserID: id, OldEmail: email, NewEmail: email, CodeHash: hash}
		}
	}
	return eventstore.NewEvent(typ, data, eventstore.Metadata{})
}

// watchedProjection is a projection that notes when each event it applies
// was applied. It keeps the name, version and types of the projection it
// wraps, so it follows the log as that projection's consumer group.
//
// An event is noted once its Apply returns, inside the subscriber's
// transaction; the transaction commits with the rest of its batch.
type watchedProjection struct {
	projections.Projection
	want  int
	first chan struct{} // closed at the first event applied
	all   chan struct{} // closed once want distinct events are applied

	mu      sync.Mutex
	applied map[uuid.UUID]time.Time
}

func watch(p projections.Projection, want int) *watchedProjection {
	return &watchedProjection{
		Projection: p,
		want:       want,
		first:      make(chan struct{}),
		all:        make(chan struct{}),
		applied:    make(map[uuid.UUID]time.Time, want),
	}
}

// Apply applies events through the wrapped projection and notes the time
// of each that is new to it: an event applied again, after an attempt that
// did not commit, keeps its first time and is counted once.
func (w *watchedProjection) Apply(ctx context.Context, tx uow.Tx, events ...eventstore.Event) error {
	if err := w.Projection.Apply(ctx, tx, events...); err != nil {
		return err
	}
	at := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	before := len(w.applied)
	for _, e := range events {
		if _, ok := w.applied[e.ID]; !ok {
			w.applied[e.ID] = at
		}
	}
	if before == 0 && len(w.applied) > 0 {
		close(w.first)
	}
	if before < w.want && len(w.applied) >= w.want {
		close(w.all)
	}
	return nil
}

// count returns how many distinct events were applied.
func (w *watchedProjection) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.applied)
}

// appliedAt returns when the event id was first applied.
func (w *watchedProjection) appliedAt(id uuid.UUID) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.applied[id]
	return at, ok
}

// runProjection runs a runner of p alone over log until stop is called,
// and reports Run's error on ran.
func runProjection(ctx context.Context, e env, log projections.Log, p projections.Projection) (stop context.CancelFunc, ran <-chan error, err error) {
	runner, err := projections.NewRunner(log, []projections.Projection{p}, projections.WithRunnerLogger(e.log))
	if err != nil {
		return nil, nil, err
	}
	ctx, stop = context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		err := runner.Run(ctx)
		_ = runner.Close()
		errc <- err
	}()
	return stop, errc, nil
}

// benchProjection appends n events of the activity's types, spread over
// benchUsers accounts, in units of work of 1000, then times a runner of the
// activity projection alone until it has applied all of them and its
// offset, committed, leaves none behind.
func benchProjection(ctx context.Context, e env, db backend, log projections.Log, n int, timed func(func() int64) func(), stdout io.Writer) error {
	store, runner := db.Events(), db.Runner(nil)
	keys, err := e.benchKeyring(db)
	if err != nil {
		return err
	}
	users := make([]uuid.UUID, benchUsers)
	for u := range users {
		users[u] = uuid.New()
	}
	const perTx = 1000
	for start := 0; start < n; start += perTx {
		err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			ctx = keyring.Within(ctx, tx)
			streams := make(map[uuid.UUID][]eventstore.Event, len(users))
			for i := start; i < min(start+perTx, n); i++ {
				id := users[i%len(users)]
				ev, err := activityEvent(ctx, tx, keys, id, i/len(users), i)
				if err != nil {
					return err
				}
				streams[id] = append(streams[id], ev)
			}
			for id, evs := range streams {
				if _, err := store.Append(ctx, tx, "user-"+id.String(), eventstore.Any, evs...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("bench projection: fill: %w", err)
		}
	}
	activity := db.Activity(keys)
	w := watch(activity, n)
	stopProfile := timed(func() int64 { return int64(w.count()) })
	defer stopProfile()
	began := time.Now()
	stop, ran, err := runProjection(ctx, e, log, w)
	if err != nil {
		return err
	}
	defer stop()
	select {
	case <-w.all:
	case err := <-ran:
		return fmt.Errorf("bench projection: runner stopped after %d of %d events: %v", w.count(), n, err)
	case <-ctx.Done():
		elapsed := time.Since(began)
		stopProfile()
		stop()
		<-ran
		done := w.count()
		fmt.Fprintf(stdout, "projection: %d events in %.2fs, %.0f events/s (cut short: %d of %d)\n",
			done, elapsed.Seconds(), float64(done)/elapsed.Seconds(), done, n)
		return &cutShortError{name: "bench projection", done: int64(done), of: int64(n), err: ctx.Err()}
	}
	// The last batch commits after its last event is applied: the figure
	// counts up to that commit.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		behind, err := activity.Behind(ctx)
		if err != nil {
			return fmt.Errorf("bench projection: %w", err)
		}
		if behind == 0 {
			break
		}
		select {
		case <-tick.C:
		case err := <-ran:
			return fmt.Errorf("bench projection: runner stopped %d events behind: %v", behind, err)
		case <-ctx.Done():
			return fmt.Errorf("bench projection: %d events behind: %w", behind, ctx.Err())
		}
	}
	elapsed := time.Since(began)
	stopProfile()
	stop()
	if err := <-ran; err != nil {
		return err
	}
	fmt.Fprintf(stdout, "projection: %d events in %.2fs, %.0f events/s\n", n, elapsed.Seconds(), float64(n)/elapsed.Seconds())
	return nil
}

// benchProjectionLag runs the activity projection while it commits rate
// units of work a second for d, each appending one sign-in, on a schedule
// that does not wait for the projection, and measures for each event the
// time from the moment its transaction asked to commit to the moment the
// projection applied it.
func benchProjectionLag(ctx context.Context, e env, db backend, log projections.Log, rate int, d time.Duration, timed func(func() int64) func(), stdout io.Writer) error {
	store, runner := db.Events(), db.Runner(nil)
	n := max(int(d.Seconds()*float64(rate)), 1)
	users := make([]uuid.UUID, benchUsers)
	for u := range users {
		users[u] = uuid.New()
	}
	sent := make([]time.Time, n)
	ids := make([]uuid.UUID, n)
	// Sign-ins carry no address: nothing is sealed or opened.
	w := watch(db.Activity(nil), n+1)
	stop, ran, err := runProjection(ctx, e, log, w)
	if err != nil {
		return err
	}
	defer stop()

	send := func(seq int) error {
		for {
			err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
				id := users[(seq+len(users))%len(users)]
				ev, err := activityEvent(ctx, tx, nil, id, 1, seq)
				if err != nil {
					return err
				}
				if _, err := store.Append(ctx, tx, "user-"+id.String(), eventstore.Any, ev); err != nil {
					return err
				}
				if seq >= 0 {
					ids[seq], sent[seq] = ev.ID, time.Now()
				}
				return nil
			})
			// Two sign-ins of one account may race under Any; the
			// loser appends again on the stream's new state.
			if !errors.Is(err, eventstore.ErrConcurrency) {
				return err
			}
		}
	}
	// One event first, so the runner follows the log before timing starts.
	if err := send(-1); err != nil {
		return err
	}
	select {
	case <-w.first:
	case err := <-ran:
		return fmt.Errorf("bench projection: warm-up: runner stopped: %v", err)
	case <-ctx.Done():
		return fmt.Errorf("bench projection: warm-up: %w", ctx.Err())
	}

	stopProfile := timed(func() int64 { return int64(w.count()) })
	defer stopProfile()
	var cut error
	if err := paced(ctx, n, rate, send); err != nil {
		if ctx.Err() == nil {
			return fmt.Errorf("bench projection: send: %w", err)
		}
		cut = ctx.Err()
	}
	if cut == nil {
		select {
		case <-w.all:
		case err := <-ran:
			return fmt.Errorf("bench projection: runner stopped after %d of %d events: %v", w.count()-1, n, err)
		case <-ctx.Done():
			cut = ctx.Err()
		}
	}
	stopProfile()
	stop()
	if err := <-ran; err != nil && cut == nil {
		return err
	}
	var lat []time.Duration
	for i := range n {
		at, ok := w.appliedAt(ids[i])
		if !ok || sent[i].IsZero() {
			if cut == nil {
				return fmt.Errorf("bench projection: event %s was not applied", ids[i])
			}
			continue
		}
		lat = append(lat, at.Sub(sent[i]))
	}
	if len(lat) == 0 {
		fmt.Fprintf(stdout, "projection lag: rate=%d/s n=0 (cut short: 0 of %d)\n", rate, n)
		return &cutShortError{name: "bench projection", of: int64(n), err: cut}
	}
	slices.Sort(lat)
	line := fmt.Sprintf("projection lag: rate=%d/s n=%d p50=%s p90=%s p99=%s max=%s",
		rate, len(lat), percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99), ms(lat[len(lat)-1]))
	if cut != nil {
		fmt.Fprintf(stdout, "%s (cut short: %d of %d)\n", line, len(lat), n)
		return &cutShortError{name: "bench projection", done: int64(len(lat)), of: int64(n), err: cut}
	}
	fmt.Fprintln(stdout, line)
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

// paced calls send(i) for i from 0 to n-1, rate times a second on a
// schedule that does not wait for earlier calls to return, and returns the
// first error once all have returned. It calls no more once ctx ends, and
// then returns ctx's error.
func paced(ctx context.Context, n, rate int, send func(i int) error) error {
	var senders sync.WaitGroup
	errs := make(chan error, n+1)
	period := time.Second / time.Duration(rate)
	began := time.Now()
	next := time.NewTimer(0)
	defer next.Stop()
	for i := range n {
		next.Reset(time.Until(began.Add(time.Duration(i) * period)))
		select {
		case <-next.C:
		case <-ctx.Done():
			errs <- ctx.Err()
			senders.Wait()
			close(errs)
			return <-errs
		}
		senders.Go(func() {
			if err := send(i); err != nil {
				errs <- err
			}
		})
	}
	senders.Wait()
	close(errs)
	return <-errs
}
