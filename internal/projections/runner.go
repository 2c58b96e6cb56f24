package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/routerlog"
	"github.com/eventsourced/accounts/internal/uow"
)

// DefaultMaxTries is how often a [Runner] tries to apply one event before
// it marks its projection failed.
const DefaultMaxTries = 10

// State is where an asynchronous projection stands.
type State string

// The states of an asynchronous projection.
const (
	StateRunning State = "running"
	StateFailed  State = "failed"
)

// Status is what a [Runner] knows of one projection.
type Status struct {
	Group string
	State State
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

// Runner keeps asynchronous projections: each is a handler of one
// Watermill router, fed by a subscriber of the [Log] for its consumer group
// ([Group]), so that it sees every event of its types once, in log order,
// and its writes commit with its offset.
//
// A projection that cannot apply an event stops; it never skips one, since
// every later event may depend on it. The event is handed over again after
// the log's resend interval, up to the runner's tries; then the projection
// is marked failed with the event's position and the error, and its handler
// stops. A fixed version started later resumes from that event, since its
// offset never moved past it.
type Runner struct {
	log      Log
	projs    []Projection
	now      func() time.Time
	logger   *slog.Logger
	maxTries int

	meter     metric.MeterProvider
	metrics   *runnerMetrics
	unobserve func()

	// recording counts the failures being recorded; Run waits for them.
	recording sync.WaitGroup

	mu     sync.Mutex
	status map[string]*Status
}

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

// WithMaxTries sets how often one event is tried before its projection is
// marked failed; the default is [DefaultMaxTries].
func WithMaxTries(n int) RunnerOption {
	return func(r *Runner) { r.maxTries = n }
}

// NewRunner returns a runner of projs over log. Their groups must differ.
func NewRunner(log Log, projs []Projection, opts ...RunnerOption) (*Runner, error) {
	r := &Runner{
		log:      log,
		projs:    projs,
		now:      time.Now,
		logger:   slog.New(slog.DiscardHandler),
		maxTries: DefaultMaxTries,
		meter:    noop.NewMeterProvider(),
		status:   make(map[string]*Status, len(projs)),
	}
	for _, o := range opts {
		o(r)
	}
	if r.maxTries < 1 {
		return nil, fmt.Errorf("projections: runner: max tries must be at least 1, got %d", r.maxTries)
	}
	for _, p := range projs {
		g := Group(p)
		if _, dup := r.status[g]; dup {
			return nil, fmt.Errorf("projections: runner: two projections are %s", g)
		}
		r.status[g] = &Status{Group: g, State: StateRunning}
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

// Status returns the status of every projection, by group.
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

// Run keeps the projections until ctx is done, or until every one has
// failed.
func (r *Runner) Run(ctx context.Context) error {
	wlog := routerlog.New(r.logger)
	router, err := message.NewRouter(message.RouterConfig{}, wlog)
	if err != nil {
		return fmt.Errorf("projections: router: %w", err)
	}
	router.AddMiddleware(middleware.Recoverer)
	for _, p := range r.projs {
		sub, err := r.log.Subscriber(Group(p), p.Types(), wlog)
		if err != nil {
			return err
		}
		h := &handler{r: r, p: p, group: Group(p)}
		h.handler = router.AddConsumerHandler(h.group, Topic, sub, h.handle)
	}
	err = router.Run(ctx)
	r.recording.Wait()
	if err != nil {
		return fmt.Errorf("projections: router: %w", err)
	}
	return nil
}

// handler applies the events of one projection.
type handler struct {
	r     *Runner
	p     Projection
	group string
	// handler is the router's handler of the projection.
	handler *message.Handler
	// tries counts the failed attempts at the event being retried.
	tries  int
	failed bool
}

func (h *handler) handle(msg *message.Message) error {
	if h.failed {
		return errFailed
	}
	err := h.r.log.Apply(msg, h.r.now(), func(ctx context.Context, tx uow.Tx, events []eventstore.Event) error {
		start := time.Now()
		if err := h.p.Apply(ctx, tx, events...); err != nil {
			return err
		}
		h.r.update(h.group, func(s *Status) {
			s.Applied += int64(len(events))
			s.Position = events[len(events)-1].Position
		})
		ctx = context.WithoutCancel(ctx)
		opt := h.r.metrics.groups[h.group]
		h.r.metrics.applied.Add(ctx, int64(len(events)), opt)
		h.r.metrics.duration.Record(ctx, time.Since(start).Seconds()/float64(len(events)), opt)
		return nil
	})
	if err == nil {
		h.tries = 0
		return nil
	}
	// The event that failed: the Log names it when a batch failed, else it
	// is the message's own. Only a failure pays for decoding it here.
	var e eventstore.Event
	var failedAt *EventError
	if errors.As(err, &failedAt) {
		e = failedAt.Event
	} else if me, derr := EventFromMessage(msg); derr == nil {
		e = me
	}
	h.tries++
	if h.tries < h.r.maxTries {
		h.r.logger.Warn("projections: apply failed; the event is handed over again",
			"projection", h.group, "event", msg.UUID, "try", h.tries, "error", err)
		return err
	}
	h.failed = true
	h.r.update(h.group, func(s *Status) { s.State, s.Position, s.Err = StateFailed, e.Position, err })

	h.r.logger.Error("projections: projection failed and stopped: it cannot apply an event, and skips none",
		"projection", h.group, "event", msg.UUID, "position", e.Position, "tries", h.tries, "error", err)
	// The failure is recorded once the handler has stopped and its batch's
	// transaction has ended: that transaction holds the group's offset
	// (and on SQLite the write lock) while this handler runs.
	f := Failure{At: h.r.now().UTC(), Position: e.Position, Error: err.Error()}
	h.r.recording.Add(1)
	go func() {
		defer h.r.recording.Done()
		h.handler.Stop()
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
	fn(r.status[group])
}
