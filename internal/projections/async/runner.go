package async

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/routerlog"
	"github.com/eventsourced/accounts/internal/uow"
)

// DefaultMaxTries is how often a [Runner] tries to apply one event before
// it marks its projection failed.
const DefaultMaxTries = 10

// State is where an asynchronous projection stands.
type State string

// The states of an asynchronous projection: running serves reads, and
// rebuilding is being built beside the version that does ([Renew]).
const (
	StateRunning    State = "running"
	StateRebuilding State = "rebuilding"
	StateFailed     State = "failed"
)

// Status is what a [Runner] knows of one projection.
type Status struct {
	// Group is the projection's consumer group: Name and Version.
	Group   string
	Name    string
	Version int
	State   State
	// Applied counts the events applied since the runner started. A batch
	// that does not commit (the runner stopped, the database went away) is
	// applied again by the next subscriber, and counted again.
	Applied int64
	// Position is the last event applied, or, when failed, the event that
	// could not be.
	Position eventstore.Position
	// Err is why the projection failed.
	Err error
}

// Runner keeps asynchronous projections: each is a handler of one Watermill
// router, fed by a subscriber of the [Log] for its consumer group
// ([projections.Group]), so that it sees every event of its types once, in
// log order, and its writes commit with its offset.
//
// A [projections.Rebuildable] projection runs at the versions the log's
// registry names ([Log.Versions]): the one serving reads and the one being
// built beside it, if any. The runner reads the registry every follow
// interval and adds and stops handlers to match, so every instance takes part
// in a rebuild and leaves the old version once reads have switched ([Renew]).
//
// A projection that cannot apply an event stops; it never skips one, since
// every later event may depend on it. The event is handed over again after
// the log's resend interval, up to the runner's tries (a database that is
// unavailable, [uow.ErrUnavailable], spends none); then the projection
// is marked failed with the event's position and the error, and its handler
// stops. A fixed version started later resumes from that event, since its
// offset never moved past it.
type Runner struct {
	log      Log
	projs    []projections.Projection
	now      func() time.Time
	logger   *slog.Logger
	maxTries int
	follow   time.Duration
	// fixed runs each projection at its own version only, whatever the
	// registry says: the runner of a rebuild.
	fixed bool

	meter     metric.MeterProvider
	metrics   *runnerMetrics
	tracers   trace.TracerProvider
	tracer    trace.Tracer
	unobserve func()

	// recording counts the failures being recorded; Run waits for them.
	recording sync.WaitGroup
	// launch is held while the router starts handlers.
	launch sync.Mutex

	mu       sync.Mutex
	status   map[string]*Status
	handlers map[string]*handler
}

// DefaultFollowInterval is how often a [Runner] reads the registry of
// versions.
const DefaultFollowInterval = time.Second

// RunnerOption configures a [Runner].
type RunnerOption func(*Runner)

// WithRunnerLogger makes the runner log to l.
func WithRunnerLogger(l *slog.Logger) RunnerOption {
	return func(r *Runner) { r.logger = l }
}

// WithRunnerMeter makes the runner record its metrics with mp.
func WithRunnerMeter(mp metric.MeterProvider) RunnerOption {
	return func(r *Runner) { r.meter = mp }
}

// WithRunnerTracer makes the runner's spans, one per batch, with tp; nil,
// the default, means otel.GetTracerProvider().
func WithRunnerTracer(tp trace.TracerProvider) RunnerOption {
	return func(r *Runner) { r.tracers = tp }
}

// WithMaxTries sets how often one event is tried before its projection is
// marked failed; the default is [DefaultMaxTries].
func WithMaxTries(n int) RunnerOption {
	return func(r *Runner) { r.maxTries = n }
}

// WithFollowInterval sets how often the runner reads the registry of
// versions; the default is [DefaultFollowInterval].
func WithFollowInterval(d time.Duration) RunnerOption {
	return func(r *Runner) { r.follow = d }
}

// NewRunner returns a runner of projs over log. Their names must differ.
func NewRunner(log Log, projs []projections.Projection, opts ...RunnerOption) (*Runner, error) {
	r := &Runner{
		log:      log,
		projs:    projs,
		now:      time.Now,
		logger:   slog.New(slog.DiscardHandler),
		maxTries: DefaultMaxTries,
		follow:   DefaultFollowInterval,
		meter:    noop.NewMeterProvider(),
		status:   make(map[string]*Status, len(projs)),
		handlers: make(map[string]*handler, len(projs)),
	}
	for _, o := range opts {
		o(r)
	}
	if r.tracers == nil {
		r.tracers = otel.GetTracerProvider()
	}
	r.tracer = r.tracers.Tracer(tracerName)
	if r.maxTries < 1 {
		return nil, fmt.Errorf("projections: runner: max tries must be at least 1, got %d", r.maxTries)
	}
	if r.follow <= 0 {
		return nil, fmt.Errorf("projections: runner: follow interval must be positive, got %s", r.follow)
	}
	names := make(map[string]bool, len(projs))
	for _, p := range projs {
		if names[p.Name()] {
			return nil, fmt.Errorf("projections: runner: two projections are named %s", p.Name())
		}
		names[p.Name()] = true
	}
	m, unobserve, err := newRunnerMetrics(r.meter, r)
	if err != nil {
		return nil, err
	}
	r.metrics, r.unobserve = m, unobserve
	return r, nil
}

// Close stops reporting the runner's metrics.
func (r *Runner) Close() error {
	r.unobserve()
	return nil
}

// Status returns the status of every projection version the runner keeps,
// by group.
func (r *Runner) Status() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Status, 0, len(r.status))
	for _, s := range r.status {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// keptGroup is a version the runner keeps, as its metrics read it.
type keptGroup struct {
	Status
	types []string
}

// kept returns the versions the runner keeps, with their types.
func (r *Runner) kept() []keptGroup {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]keptGroup, 0, len(r.status))
	for g, s := range r.status {
		out = append(out, keptGroup{Status: *s, types: r.handlers[g].p.Types()})
	}
	return out
}

// Run keeps the projections until ctx is done, or until every one has
// failed.
func (r *Runner) Run(ctx context.Context) error {
	wlog := routerlog.New(r.logger)
	router, err := message.NewRouter(message.RouterConfig{}, wlog)
	if err != nil {
		return fmt.Errorf("projections: router: %w", err)
	}
	router.AddMiddleware(middleware.Recoverer)
	// The handlers of the versions the registry names are added before the
	// router runs, when the registry answers; otherwise, and whenever it
	// changes, while it runs.
	started, err := r.reconcile(ctx, router, wlog)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil
	case errors.Is(err, uow.ErrUnavailable):
		r.logger.Warn("projections: read the registry of versions; trying again", "error", err)
		started = false
	default:
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A router with no handler yet (the registry did not answer) closes
	// only when told to.
	go func() {
		<-runCtx.Done()
		_ = router.Close()
	}()
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		r.followRegistry(runCtx, router, wlog, started)
	}()
	err = router.Run(runCtx)
	cancel()
	<-followed
	r.recording.Wait()
	// A router stopped while it was starting its handlers says so; that
	// is no failure of the projections.
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("projections: router: %w", err)
	}
	return nil
}

// followRegistry reconciles the router's handlers with the registry every
// follow interval until ctx is done or the router closes.
func (r *Runner) followRegistry(ctx context.Context, router *message.Router, wlog watermill.LoggerAdapter, started bool) {
	select {
	case <-router.Running():
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(r.follow)
	defer tick.Stop()
	// unstarted is whether handlers were added that the router has not
	// started: RunHandlers failed (a subscriber could not subscribe), and
	// is called again at each tick until it succeeds.
	unstarted := false
	for {
		if !started || !r.fixed {
			added, err := r.reconcile(ctx, router, wlog)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				r.logger.Warn("projections: follow the registry of versions", "error", err)
			} else {
				started = true
			}
			unstarted = unstarted || added
		}
		if unstarted {
			r.launch.Lock()
			err := router.RunHandlers(ctx)
			r.launch.Unlock()
			switch {
			case err == nil:
				unstarted = false
			case ctx.Err() != nil:
				return
			default:
				r.logger.Error("projections: start handlers; trying again", "error", err)
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// wanted returns the versions of p to run, with the state of each.
func (r *Runner) wanted(ctx context.Context, p projections.Projection) (map[int]State, error) {
	if _, ok := p.(projections.Rebuildable); !ok || r.fixed {
		return map[int]State{p.Version(): StateRunning}, nil
	}
	v, err := r.log.Versions(ctx, p.Name(), p.Version())
	if err != nil {
		return nil, err
	}
	want := map[int]State{v.Serving: StateRunning}
	if v.Building != 0 {
		want[v.Building] = StateRebuilding
	}
	return want, nil
}

// reconcile adds a handler for each version wanted that has none, and
// stops those of versions no longer wanted. It reports whether it added
// one; the first error of the registry ends it early, having changed
// nothing for the projection it was reading.
func (r *Runner) reconcile(ctx context.Context, router *message.Router, wlog watermill.LoggerAdapter) (added bool, err error) {
	for _, p := range r.projs {
		want, err := r.wanted(ctx, p)
		if err != nil {
			return added, err
		}
		for version, state := range want {
			q := p
			if rb, ok := p.(projections.Rebuildable); ok && version != p.Version() {
				q = rb.At(version)
			}
			g := projections.Group(q)
			r.mu.Lock()
			h, running := r.handlers[g]
			if running {
				if s := r.status[g]; s.State != StateFailed {
					s.State = state
				}
			}
			r.mu.Unlock()
			if running {
				continue
			}
			sub, err := r.log.Subscriber(g, q.Types(), wlog)
			if err != nil {
				return added, err
			}
			h = &handler{r: r, p: q, group: g}
			h.handler = router.AddConsumerHandler(g, Topic, sub, h.handle)
			r.mu.Lock()
			r.handlers[g] = h
			r.status[g] = &Status{Group: g, Name: q.Name(), Version: version, State: state}
			r.mu.Unlock()
			r.metrics.track(g)
			added = true
		}
		r.mu.Lock()
		var gone []*handler
		for g, h := range r.handlers {
			if h.p.Name() != p.Name() {
				continue
			}
			if _, ok := want[h.p.Version()]; !ok {
				gone = append(gone, h)
				delete(r.handlers, g)
				delete(r.status, g)
			}
		}
		r.mu.Unlock()
		for _, h := range gone {
			r.logger.Info("projections: version left", "projection", h.group)
			h.stop()
		}
	}
	return added, nil
}

// handler applies the events of one projection.
type handler struct {
	r     *Runner
	p     projections.Projection
	group string
	// handler is the router's handler of the projection.
	handler *message.Handler
	// mu is held while a batch is handled; tries counts the failed
	// attempts at the batch being retried.
	mu     sync.Mutex
	tries  int
	failed bool
	// stopOnce stops the router's handler once: when it failed, or when
	// its version is no longer wanted.
	stopOnce sync.Once
}

// stop stops the router's handler: at once when it has started, or else
// once it starts. Watermill's Handler.Stop panics on a handler not started
// yet, and a handler's start is complete only once the RunHandlers that
// started it has returned, which launch serialises.
func (h *handler) stop() {
	h.stopOnce.Do(func() {
		select {
		case <-h.handler.Started():
			h.r.launch.Lock()
			defer h.r.launch.Unlock()
			h.handler.Stop()
		default:
			go func() {
				<-h.handler.Started()
				h.r.launch.Lock()
				defer h.r.launch.Unlock()
				h.handler.Stop()
			}()
		}
	})
}

func (h *handler) handle(msg *message.Message) error {
	// One batch at a time: a subscriber that stopped waiting for a batch
	// (its ack deadline passed) hands over the next while this handler may
	// still be at the last.
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed {
		return errFailed
	}
	// The batch's span is the parent of the database's work for it.
	ctx, span := startBatch(msg.Context(), h.r.tracer, h.p, h.group, msg.Metadata.Get(MetadataBatchEnd))
	defer span.End()
	msg.SetContext(ctx)
	handed := false
	err := h.r.log.Apply(msg, h.r.now(), func(ctx context.Context, tx uow.Tx, events []eventstore.Event) error {
		if !handed {
			// Apply hands a failed batch over again one event at a time;
			// the span counts what it was given first.
			batchEvents(span, events)
			handed = true
		}
		start := time.Now()
		if err := h.p.Apply(ctx, tx, events...); err != nil {
			return err
		}
		h.r.update(h.group, func(s *Status) {
			s.Applied += int64(len(events))
			s.Position = events[len(events)-1].Position
		})
		ctx = context.WithoutCancel(ctx)
		opt := h.r.metrics.of(h.group)
		h.r.metrics.applied.Add(ctx, int64(len(events)), opt)
		h.r.metrics.duration.Record(ctx, time.Since(start).Seconds()/float64(len(events)), opt)
		return nil
	})
	if err == nil {
		h.tries = 0
		return nil
	}
	// The event that failed, as the Log names it; else the batch's end.
	var e eventstore.Event
	var failedAt *EventError
	if errors.As(err, &failedAt) {
		e = failedAt.Event
	} else if end, perr := projections.ParsePosition(msg.Metadata.Get(MetadataBatchEnd)); perr == nil {
		e.Position = end
	}
	failBatch(span, e, h.tries+1, err)
	if errors.Is(err, uow.ErrUnavailable) {
		// The database went away: no fault of the event, and no try spent.
		h.r.logger.Warn("projections: the database is unavailable; the batch is handed over again",
			"projection", h.group, "error", err)
		return err
	}
	h.tries++
	if h.tries < h.r.maxTries {
		h.r.logger.Warn("projections: apply failed; the batch is handed over again",
			"projection", h.group, "position", projections.FormatPosition(e.Position), "try", h.tries, "error", err)
		return err
	}
	h.failed = true
	h.r.update(h.group, func(s *Status) { s.State, s.Position, s.Err = StateFailed, e.Position, err })

	h.r.logger.Error("projections: projection failed and stopped: it cannot apply an event, and skips none",
		"projection", h.group, "event", e.ID, "position", projections.FormatPosition(e.Position), "tries", h.tries, "error", err)
	// The failure is recorded once the handler has stopped and its batch's
	// transaction has ended: that transaction holds the group's offset
	// (and on SQLite the write lock) while this handler runs.
	f := projections.Failure{At: h.r.now().UTC(), Position: e.Position, Error: err.Error()}
	h.r.recording.Add(1)
	go func() {
		defer h.r.recording.Done()
		// Stopped from here, not from the handler: a stop waits for the
		// router's starts (launch), and on SQLite a start may wait for the
		// connection this handler's batch holds.
		h.stop()
		<-h.handler.Started()
		<-h.handler.Stopped()
		if ferr := h.r.log.Fail(context.Background(), h.group, f); ferr != nil {
			h.r.logger.Error("projections: record the failure", "projection", h.group, "error", ferr)
		}
	}()
	return err
}

var errFailed = errors.New("projections: the projection has failed")

func (r *Runner) update(group string, fn func(*Status)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.status[group]; s != nil {
		fn(s)
	}
}
