package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/routerlog"
)

var errOverclaimed = errors.New("claimed more often than allowed without finishing")

// HeldBatches is how many batches of messages a relay may hold at once,
// claimed and not yet settled. Two claims may run at once, and each
// delivered message keeps its place until its acknowledgement is written,
// so fewer batches leave the claims waiting for places in a drain.
const HeldBatches = 8

// Relay delivers the messages of an [outbox.Store] to the [outbox.Handler] of
// their topic.
//
// [Relay.Run] runs a Watermill router with a handler per topic, fed by a
// subscriber that claims due messages in batches and settles each on its Ack
// or Nack; [Relay.Drain] delivers what is due in one synchronous pass. Both
// run each handler under the same router middleware (a span per delivery, the
// outcome's reason and timing, panic recovery, the timeout) and settle its
// outcome the same way: a success is acknowledged, an error is retried after
// [outbox.Backoff], and a message is buried once its topic's [RetryPolicy] is
// spent ([outbox.RelayConfig.MaxAttempts] failures unless [WithRetryPolicy]
// says otherwise), at its first failure when the handler's error wraps
// [outbox.ErrPermanent], or when it was claimed again after its policy was
// spent without finishing, since it may be what crashes the relay.
//
// A relay claims only the messages of the topics it has a handler for (an
// [outbox.Scope] with their names narrows every claim). A message of another
// topic is left in the store as it is, due, its attempts unspent, for a
// relay whose configuration has that topic's handler: an instance started
// without a broker or a mail server leaves those messages alone, instead of
// burying them. Whether they wait too long the outbox.backlog gauges show.
//
// A relay keeps these promises:
//
//   - No message is handled by two of its goroutines at once while its lease
//     holds. A handler's context ends at [outbox.RelayConfig.Timeout]; a
//     handler that goes on regardless keeps its message leased, and the
//     message is not tried again until the handler has returned (its outcome
//     is then recorded) or the lease has ended. A handler still running then
//     is counted in outbox.overran and logged with the message ID.
//   - Every outcome is recorded under the claim's [outbox.Lease], so a relay
//     that has lost its claim changes nothing, whatever its clock says.
//   - A relay holds at most [HeldBatches]×[outbox.RelayConfig.Batch] messages
//     claimed and not yet settled: it claims the next batch while the
//     previous ones are delivered and their acknowledgements written, and
//     claims only when a whole batch fits. Abandoned handlers keep their slot, so they cannot
//     pile up.
//   - A delivered message is acknowledged with whatever else was delivered
//     meanwhile or within 20 ms, never waiting for the slowest of its batch:
//     the wait spares the database a transaction per message when they come
//     one at a time. It is skipped once a batch's worth waits, for a message
//     with an ordering key, while fewer slots are free than two claims need,
//     and for a lease that would end too soon. So a valid
//     [outbox.RelayConfig] still leaves every lease [outbox.SettleTimeout] to
//     record the outcome of a delivery that took the whole timeout. A crash
//     loses the acknowledgements not yet written, whose messages are
//     delivered again.
//   - While every delivery of a topic fails, or once one could not reach
//     its destination at all ([outbox.ErrUnreachable]), a circuit breaker stops
//     claiming that topic's messages, so that an outage does not spend
//     their attempts; see [breakers].
type Relay struct {
	store    outbox.RelayStore
	handlers map[string]outbox.Handler
	// topics are the topics of handlers, sorted: the only ones it claims.
	topics  []string
	cfg     outbox.RelayConfig
	now     func() time.Time
	log     *slog.Logger
	meter   metric.MeterProvider
	metrics *relayMetrics
	tp      trace.TracerProvider
	tracer  trace.Tracer // nil when tp is a no-op provider
	// spanNames are the names of the delivery spans, by topic.
	spanNames map[string]string
	breakers  *breakers
	policies  map[string]RetryPolicy
	// stopGrace bounds the deliveries in flight once Run's context ends;
	// zero leaves them their timeout.
	stopGrace time.Duration
	// ackDelay is how long an acknowledgement waits for others ([acker]).
	ackDelay    time.Duration
	settledKeys *settledKeys
	sem         *semaphore
	inflight    inflight
	// chains are the handlers under the relay's middleware, for Drain.
	chains map[string]message.HandlerFunc
	// returned counts the handlers that have returned and whose messages
	// are not yet settled.
	returned tally
	// claimsFailing is set while claims fail, so that only the first
	// failure of a run is logged at error.
	claimsFailing atomic.Bool
	// claimErr is the error of the latest claim while claims fail, nil
	// otherwise.
	claimErr atomic.Pointer[error]
	// claimRetry returns a channel that receives once a failed claim is to
	// be tried again, after the wait it is given: time.After, or the
	// signal of a test.
	claimRetry func(time.Duration) <-chan time.Time
	// unobserve stops the gauges' callback.
	unobserve func()
}

// New returns a relay that delivers the messages of store to handlers,
// keyed by topic. Zero fields of cfg take their defaults; a config that still
// cannot work is an error.
func New(store outbox.RelayStore, handlers map[string]outbox.Handler, cfg outbox.RelayConfig, opts ...Option) (*Relay, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Relay{
		store:       store,
		handlers:    make(map[string]outbox.Handler, len(handlers)),
		cfg:         cfg,
		now:         time.Now,
		log:         slog.New(slog.DiscardHandler),
		meter:       noop.NewMeterProvider(),
		sem:         newSemaphore(HeldBatches * cfg.Batch),
		settledKeys: newSettledKeys(),
		ackDelay:    ackDelay,
		claimRetry:  time.After,
	}
	topics := make([]string, 0, len(handlers))
	for topic, h := range handlers {
		if h == nil {
			return nil, fmt.Errorf("outbox: nil handler for topic %q", topic)
		}
		r.handlers[topic] = h
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	r.topics = topics
	for _, o := range opts {
		o(r)
	}
	for topic, p := range r.policies {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("outbox: retry policy of %q: %w", topic, err)
		}
	}
	if r.tp == nil {
		r.tp = otel.GetTracerProvider()
	}
	if _, off := r.tp.(tracenoop.TracerProvider); !off {
		r.tracer = r.tp.Tracer(tracerName)
	}
	r.spanNames = make(map[string]string, len(topics))
	for _, topic := range topics {
		r.spanNames[topic] = spanName(topic)
	}
	r.breakers = newBreakers(topics, cfg.Lease, r.log)
	m, err := newRelayMetrics(r.meter, topics)
	if err != nil {
		return nil, err
	}
	if r.unobserve, err = m.observe(store, r.now, r.breakers); err != nil {
		return nil, err
	}
	r.metrics = m
	r.chains = make(map[string]message.HandlerFunc, len(r.handlers))
	for topic, h := range r.handlers {
		r.chains[topic] = r.chain(h)
	}
	return r, nil
}

// ErrCannotClaim is returned by [Relay.Ready] while the relay's claims fail.
var ErrCannotClaim = errors.New("outbox: the relay cannot claim messages")

// Ready returns nil unless the relay's latest claim failed, and then an
// error wrapping [ErrCannotClaim] and the claim's error, until a claim
// succeeds again. Under [Relay.Run] a failed claim is tried again within
// seconds, however long [outbox.RelayConfig.Interval] is, so Ready returns nil
// again soon after the store is back. A relay that has not claimed yet is
// ready.
func (r *Relay) Ready() error {
	if err := r.claimErr.Load(); err != nil {
		return fmt.Errorf("%w: %w", ErrCannotClaim, *err)
	}
	return nil
}

// Close stops reporting the relay's metrics. A closed relay still runs.
func (r *Relay) Close() error {
	r.unobserve()
	return nil
}

// Wait returns once every message the relay holds is settled: in
// particular once the handlers that [Relay.Drain] left running past their
// timeout have returned and their outcomes are recorded, and once the
// units of work that it took messages from ([outbox.Handover]) have ended and
// their messages are settled. It returns ctx's error if ctx ends first.
func (r *Relay) Wait(ctx context.Context) error {
	return r.sem.waitIdle(ctx)
}

// Run delivers messages until ctx is done. It then claims no more. Deliveries
// in flight finish, within [outbox.RelayConfig.Timeout] or the grace of
// [WithStopGrace], and are settled; a message claimed but not handed to its
// handler is released, due again at once with its attempt given back, and one
// whose outcome could not be recorded is claimed again when its lease ends,
// so nothing is lost.
func (r *Relay) Run(ctx context.Context) error {
	left := r.cfg.Timeout
	if r.stopGrace > 0 {
		left = min(left, r.stopGrace)
	}
	router, err := message.NewRouter(message.RouterConfig{
		CloseTimeout: left + outbox.SettleTimeout,
	}, routerLogger{routerlog.New(r.log)})
	if err != nil {
		return fmt.Errorf("outbox: router: %w", err)
	}
	// cut ends the handlers' contexts once the stop's grace has run out.
	cut, cutNow := context.WithCancel(context.WithoutCancel(ctx))
	finished := make(chan struct{})
	defer func() {
		close(finished)
		cutNow()
	}()
	if r.stopGrace > 0 {
		go func() {
			select {
			case <-ctx.Done():
			case <-finished:
				return
			}
			t := time.NewTimer(r.stopGrace)
			defer t.Stop()
			select {
			case <-t.C:
				cutNow()
			case <-finished:
			}
		}()
	}
	router.AddMiddleware(r.middleware()...)
	a := newAcker(r)
	sub := newSubscriber(r, a)
	if r.stopGrace > 0 {
		sub.cut = cut
	}
	topics := make([]string, 0, len(r.handlers))
	for topic := range r.handlers {
		topics = append(topics, topic)
		router.AddConsumerHandler("outbox."+topic, topic, sub, consume(r.handlers[topic]))
	}
	if len(topics) == 0 {
		// A router without handlers runs until it is closed. The relay
		// then claims nothing.
		go func() {
			<-ctx.Done()
			_ = router.Close()
		}()
	}
	go a.run()
	sub.start(ctx, topics)
	err = router.Run(ctx)
	// The router has stopped once every topic's channel is closed and its
	// handlers have returned, or its close timed out. The messages of the
	// handlers that returned are settled by now or soon.
	_ = sub.Close()
	r.returned.wait()
	a.stop()
	if err != nil {
		return fmt.Errorf("outbox: relay: %w", err)
	}
	return nil
}

// routerLogger is the relay's router logger. It writes the router's line
// for each handler that returned an error at debug: the relay logs each
// failed delivery itself, with its outcome.
type routerLogger struct{ watermill.LoggerAdapter }

func (l routerLogger) Error(msg string, err error, fields watermill.LogFields) {
	if msg == "Handler returned error" {
		l.LoggerAdapter.Debug(msg, fields.Add(watermill.LogFields{"error": err}))
		return
	}
	l.LoggerAdapter.Error(msg, err, fields)
}

func (l routerLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return routerLogger{l.LoggerAdapter.With(fields)}
}
