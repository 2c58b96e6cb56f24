package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/pgcluster"
)

// Config says what to run and for how long. Zero fields take the defaults
// of [Config.WithDefaults].
type Config struct {
	// Binary is the app binary; each instance runs `Binary serve`, and the
	// master key comes from `Binary keys new`. Env is added to the
	// environment of every run of it (for a test binary that acts as the
	// app, say).
	Binary string
	Env    []string
	// Dir holds the instances' logs and the broker's store. Empty: a
	// temporary directory, removed when the soak passes.
	Dir string

	// Instances is how many app processes run at once (default 3).
	Instances int
	// Duration is how long the steady load and the faults last (default
	// 30m); Users, when positive, ends it earlier after that many flows.
	Duration time.Duration
	Users    int
	// Workers is how many users go through their flows at once (default
	// 16), and Rate how many flows start each second at most (default 20;
	// negative: as many as the workers manage), so that the load stays the
	// same over the run whatever else the machine does.
	Workers int
	Rate    float64

	// KillEvery is the time between two kills of an instance (default 1m;
	// negative: none). Instance 0 is never killed, so that its memory tells
	// the trend of a long-lived process; the others take turns.
	KillEvery time.Duration
	// RestartPostgresAt is when, into the steady phase, PostgreSQL is
	// restarted (default half of Duration; negative: never).
	RestartPostgresAt time.Duration
	// SMTPOutageEvery and SMTPOutageFor make the SMTP server refuse every
	// recipient (451) for SMTPOutageFor out of each SMTPOutageEvery
	// (defaults 45s and 4s; a negative SMTPOutageEvery: never).
	SMTPOutageEvery, SMTPOutageFor time.Duration

	// SampleEvery is the interval between samples (default 10s).
	SampleEvery time.Duration
	// Warmup is the part of the steady phase after which memory and the
	// outbox must stay flat (default a fifth of Duration).
	Warmup time.Duration
	// CheckTrends makes flat memory and outbox and the drain ratio part of
	// the verdict; without it they are only reported (short runs are too
	// short to tell a trend).
	CheckTrends bool
	// DrainBurst is how many sign-in links each drain measurement asks for
	// at once (default 2000).
	DrainBurst int
	// MailWait bounds the wait for one mail, and for a user's events to
	// reach the broker before the account is deleted (default 3m).
	MailWait time.Duration
	// Lease is the instances' OUTBOX_LEASE (default 20s, with
	// OUTBOX_TIMEOUT 10s), so that the messages a killed instance held are
	// claimed again soon.
	Lease time.Duration

	// Picture is the file the SVG is written to; empty: none.
	Picture string
	// Log receives progress lines; nil: none.
	Log io.Writer
}

// WithDefaults returns c with each zero field set to its default.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Instances == 0 {
		c.Instances = 3
	}
	if c.Workers == 0 {
		c.Workers = 16
	}
	if c.Rate == 0 {
		c.Rate = 20
	}
	def(&c.Duration, 30*time.Minute)
	def(&c.KillEvery, time.Minute)
	def(&c.RestartPostgresAt, c.Duration/2)
	def(&c.SMTPOutageEvery, 45*time.Second)
	def(&c.SMTPOutageFor, 4*time.Second)
	def(&c.SampleEvery, 10*time.Second)
	def(&c.Warmup, c.Duration/5)
	def(&c.MailWait, 3*time.Minute)
	def(&c.Lease, 20*time.Second)
	if c.DrainBurst == 0 {
		c.DrainBurst = 2000
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// Validate reports the values of c that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Binary == "" {
		errs = append(errs, errors.New("the app binary is not set"))
	}
	if c.Instances < 1 {
		errs = append(errs, fmt.Errorf("instances must be at least 1, got %d", c.Instances))
	}
	if c.KillEvery > 0 && c.Instances < 2 {
		errs = append(errs, errors.New("killing instances needs at least 2 (instance 0 is never killed)"))
	}
	if c.Workers < 1 || c.DrainBurst < 1 || c.Duration <= 0 || c.SampleEvery <= 0 || c.MailWait <= 0 {
		errs = append(errs, errors.New("workers, drain burst, duration, sample interval and mail wait must be positive"))
	}
	if c.SMTPOutageEvery > 0 && c.SMTPOutageFor >= c.SMTPOutageEvery {
		errs = append(errs, errors.New("an SMTP outage must be shorter than the time between two"))
	}
	if c.Lease < 20*time.Second {
		errs = append(errs, fmt.Errorf("the lease must be at least 20s (OUTBOX_TIMEOUT 10s plus the relay's 10s to settle), got %s", c.Lease))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	return nil
}

// Result is what a soak saw. Failures lists every broken promise; an
// empty list is a pass.
type Result struct {
	Failures []string
	// Notes are observations that are not failures (trends of a short
	// run, for example).
	Notes []string

	Requests, Accepted     int
	Statuses               map[int]int
	Flows, Stalled         int
	MailsExpected          int
	MailsReceived, Repeats int
	Events, EventRepeats   int
	Users, Deleted         int
	Kills, PostgresRestart int
	SMTPOutages            int

	// DrainStart and DrainEnd are the mails per second of the best of three
	// bursts at each end, each three after one that warms up.
	DrainStart, DrainEnd float64
	// RSSGrowth and OutboxGrowth are the last window's mean over the first
	// window's after warm-up, for instance 0 and the outbox table.
	RSSGrowth, OutboxGrowth float64
	LatencyP50, LatencyP99  time.Duration
	Elapsed                 time.Duration
}

// Summary is the one line a benchmark prints last.
func (r *Result) Summary() string {
	verdict := "PASS"
	if len(r.Failures) > 0 {
		verdict = fmt.Sprintf("FAIL (%d findings)", len(r.Failures))
	}
	return fmt.Sprintf("soak: %s in %s: %d requests accepted, %d flows, %d mails of %d expected (%d repeats), %d events (%d repeats), %d kills, %d PostgreSQL restarts; RSS x%.2f, outbox x%.2f; drain %.0f then %.0f mails/s (x%.2f); p50 %s p99 %s",
		verdict, r.Elapsed.Round(time.Second), r.Accepted, r.Flows, r.MailsReceived, r.MailsExpected, r.Repeats,
		r.Events, r.EventRepeats, r.Kills, r.PostgresRestart, r.RSSGrowth, r.OutboxGrowth,
		r.DrainStart, r.DrainEnd, ratio(r.DrainEnd, r.DrainStart), r.LatencyP50.Round(100*time.Microsecond), r.LatencyP99.Round(100*time.Microsecond))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// ErrFailed is returned, wrapped, when the soak ran and found failures.
var ErrFailed = errors.New("soak: the service broke a promise")

// Run runs the soak and returns what it saw; the error is ErrFailed when it
// found failures, or why it could not run.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &soak{cfg: cfg, log: cfg.Log, began: time.Now()}
	res, err := s.run(ctx)
	if res != nil {
		res.Elapsed = time.Since(s.began)
	}
	return res, err
}

type soak struct {
	cfg   Config
	log   io.Writer
	logMu sync.Mutex
	began time.Time
	dir   string

	cluster   *pgcluster.Cluster
	nats      *natsServer
	mail      *mailServer
	instances []*instance
	ledger    *ledger
	broker    *brokerReader
	samples   *sampler
	faults    *faultLog
	client    *client
	dataKey   string
}

// logf writes a progress line; the drivers and the chaos write at once.
func (s *soak) logf(format string, args ...any) {
	line := fmt.Sprintf("%7s  %s\n", time.Since(s.began).Round(time.Second), fmt.Sprintf(format, args...))
	s.logMu.Lock()
	defer s.logMu.Unlock()
	_, _ = io.WriteString(s.log, line)
}

func (s *soak) run(ctx context.Context) (res *Result, err error) {
	s.dir = s.cfg.Dir
	removeDir := false
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "soak-"); err != nil {
			return nil, fmt.Errorf("soak: %w", err)
		}
		removeDir = true
	}
	defer func() {
		if removeDir && err == nil {
			_ = os.RemoveAll(s.dir)
		} else if removeDir {
			fmt.Fprintf(s.log, "soak: instance logs kept in %s\n", s.dir)
		}
	}()
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()

	s.logf("creating a PostgreSQL cluster")
	if s.cluster, err = pgcluster.Create(ctx); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	cleanups = append(cleanups, func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.cluster.Drop(dctx); err != nil {
			fmt.Fprintf(s.log, "soak: %v\n", err)
		}
	})
	if s.nats, err = startNATS(ctx, filepath.Join(s.dir, "nats")); err != nil {
		return nil, err
	}
	cleanups = append(cleanups, s.nats.stop)
	if s.mail, err = startMailServer(); err != nil {
		return nil, err
	}
	cleanups = append(cleanups, s.mail.close)
	if s.dataKey, err = newDataKey(ctx, s.cfg); err != nil {
		return nil, err
	}
	s.ledger = newLedger()
	s.faults = &faultLog{}
	s.client = newClient(s.ledger)
	for i := range s.cfg.Instances {
		in, err := s.newInstance(i)
		if err != nil {
			return nil, err
		}
		s.instances = append(s.instances, in)
	}
	cleanups = append(cleanups, func() {
		for _, in := range s.instances {
			in.stop()
		}
	})
	// The first instance migrates the database; the others start after it.
	for _, in := range s.instances {
		if err := in.start(ctx); err != nil {
			return nil, err
		}
		s.client.add(in.url)
	}
	s.logf("%d instances up on %s", len(s.instances), strings.Join(s.client.urls(), " "))
	if s.broker, err = readBroker(ctx, s.nats.url); err != nil {
		return nil, err
	}
	cleanups = append(cleanups, s.broker.close)
	s.samples = newSampler(s.cluster.URL("postgres"), s.instances, s.client, s.cfg.SampleEvery)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() { s.samples.run(sampleCtx, s.began) })
	cleanups = append(cleanups, func() { stopSampling(); sampling.Wait() })

	res = &Result{}
	if res.DrainStart, err = s.bestBurst(ctx, "start"); err != nil {
		return nil, err
	}
	s.logf("drain at the start: %.0f mails/s", res.DrainStart)

	steadyFrom := time.Now()
	s.steady(ctx, res)
	steadyTo := time.Now()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("soak: cut short: %w", ctx.Err())
	}

	// Every instance up and the mail server healthy before the end's bursts.
	for _, in := range s.instances {
		if !in.running() {
			if err := in.start(ctx); err != nil {
				return nil, err
			}
		}
	}
	s.mail.refuse(false)
	if err := s.settle(ctx); err != nil {
		res.Failures = append(res.Failures, err.Error())
	}
	if res.DrainEnd, err = s.bestBurst(ctx, "end"); err != nil {
		return nil, err
	}
	s.logf("drain at the end: %.0f mails/s", res.DrainEnd)
	if err := s.settle(ctx); err != nil {
		res.Failures = append(res.Failures, err.Error())
	}
	if err := projectionsCaughtUp(ctx, s.cfg, s.cluster.URL("postgres"), time.Minute); err != nil {
		res.Failures = append(res.Failures, err.Error())
	}
	stopSampling()
	sampling.Wait()

	s.check(res, steadyFrom, steadyTo)
	if s.cfg.Picture != "" {
		if err := s.draw(s.cfg.Picture, steadyFrom, steadyTo); err != nil {
			return res, err
		}
	}
	if len(res.Failures) > 0 {
		return res, fmt.Errorf("%w: %d findings", ErrFailed, len(res.Failures))
	}
	return res, nil
}

// steady runs the load and the faults for the configured time.
func (s *soak) steady(ctx context.Context, res *Result) {
	s.logf("steady load for %s: %d workers, %g flows/s, a kill every %s, PostgreSQL restarted at %s, SMTP refusing %s of every %s",
		s.cfg.Duration, s.cfg.Workers, s.cfg.Rate, s.cfg.KillEvery, s.cfg.RestartPostgresAt, s.cfg.SMTPOutageFor, s.cfg.SMTPOutageEvery)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Duration)
	defer cancel()
	d := &driver{s: s}
	if s.cfg.Rate > 0 {
		d.starts = make(chan struct{})
		go func() {
			t := time.NewTicker(time.Duration(float64(time.Second) / s.cfg.Rate))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					select {
					case d.starts <- struct{}{}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Go(func() { d.work(ctx) })
	}
	var chaos sync.WaitGroup
	chaos.Go(func() { s.chaos(ctx, res) })
	progress := time.NewTicker(time.Minute)
	defer progress.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
			cancel()
		case <-progress.C:
			st := s.ledger.stats()
			s.logf("%d flows, %d requests accepted, %d mails, %d events", d.flows.Load(), st.accepted, s.mail.count(), s.broker.count())
		}
	}
	chaos.Wait()
	res.Flows, res.Stalled = int(d.flows.Load()), int(d.stalled.Load())
	if s.cfg.Users > 0 {
		res.Flows = min(res.Flows, s.cfg.Users)
	}
}

// chaos kills instances, restarts PostgreSQL and turns the SMTP server's
// refusals on and off until ctx ends.
func (s *soak) chaos(ctx context.Context, res *Result) {
	start := time.Now()
	tick := func(every time.Duration) <-chan time.Time {
		if every <= 0 {
			return nil
		}
		t := time.NewTicker(every)
		go func() { <-ctx.Done(); t.Stop() }()
		return t.C
	}
	kills, outages := tick(s.cfg.KillEvery), tick(s.cfg.SMTPOutageEvery)
	var pgRestart <-chan time.Time
	if s.cfg.RestartPostgresAt >= 0 && s.cfg.RestartPostgresAt < s.cfg.Duration {
		t := time.NewTimer(time.Until(start.Add(s.cfg.RestartPostgresAt)))
		defer t.Stop()
		pgRestart = t.C
	}
	var smtpBack <-chan time.Time
	next := 1
	for {
		select {
		case <-ctx.Done():
			s.mail.refuse(false)
			return
		case <-kills:
			in := s.instances[next]
			next = next%(len(s.instances)-1) + 1
			s.faults.add(fault{kind: "kill", at: time.Now(), instance: in.index})
			in.kill()
			res.Kills++
			if err := in.start(ctx); err != nil && ctx.Err() == nil {
				res.Failures = append(res.Failures, fmt.Sprintf("instance %d did not start again after a kill: %v", in.index, err))
			}
		case <-pgRestart:
			from := time.Now()
			s.logf("restarting PostgreSQL")
			err := s.cluster.Restart(context.WithoutCancel(ctx))
			s.faults.add(fault{kind: "postgres", at: from, until: time.Now()})
			res.PostgresRestart++
			if err != nil {
				res.Failures = append(res.Failures, fmt.Sprintf("PostgreSQL did not restart: %v", err))
			}
			s.logf("PostgreSQL back after %s", time.Since(from).Round(time.Millisecond))
		case <-outages:
			s.mail.refuse(true)
			s.faults.add(fault{kind: "smtp", at: time.Now(), until: time.Now().Add(s.cfg.SMTPOutageFor)})
			res.SMTPOutages++
			smtpBack = time.After(s.cfg.SMTPOutageFor)
		case <-smtpBack:
			s.mail.refuse(false)
			smtpBack = nil
		}
	}
}

// settle waits until the outbox has nothing left to deliver and the broker
// reader has read the whole stream.
func (s *soak) settle(ctx context.Context) error {
	deadline := time.Now().Add(s.cfg.MailWait + time.Minute)
	conn, err := connect(ctx, s.cluster.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for {
		var pending, buried int
		err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE buried_at IS NULL), count(*) FILTER (WHERE buried_at IS NOT NULL) FROM outbox_messages`).Scan(&pending, &buried)
		if err == nil && pending == 0 && s.broker.caughtUp(ctx) {
			if buried > 0 {
				return fmt.Errorf("%d outbox messages buried", buried)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the outbox still holds %d messages to deliver %s after the load stopped (error %v)", pending, s.cfg.MailWait+time.Minute, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("soak: connect to the database: %w", err)
	}
	return conn, nil
}

// fault is one fault the soak caused.
type fault struct {
	kind      string // kill, postgres, smtp
	at, until time.Time
	instance  int
}

type faultLog struct {
	mu     sync.Mutex
	faults []fault
}

func (f *faultLog) add(x fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, x)
}

func (f *faultLog) all() []fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slicesClone(f.faults)
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

func slicesClone[T any](s []T) []T { return append([]T(nil), s...) }
