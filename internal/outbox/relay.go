package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Metadata keys of the Watermill messages a relay hands to its router.
const (
	MetadataTopic     = "outbox_topic"
	MetadataAttempts  = "outbox_attempts"
	MetadataCreatedAt = "outbox_created_at"
	// MetadataLeaseEnd is when the claim that brought the message ends.
	MetadataLeaseEnd = "outbox_lease_end"
	// metadataOutcome records how process settled a message: one of the
	// outcome constants. The subscriber acknowledges the delivered ones.
	metadataOutcome = "outbox_outcome"
)

// Outcomes of one delivery.
const (
	outcomeDelivered = "delivered"
	outcomeRetried   = "retried"
	outcomeBuried    = "buried"
)

// routerTopic is the one topic the relay's subscriber serves: it claims
// messages of every outbox topic, and the relay dispatches them by their
// [MetadataTopic], so that a topic without a handler is buried, not ignored.
const routerTopic = "outbox"

// settleTimeout bounds each store call that records an outcome.
const settleTimeout = 10 * time.Second

var (
	errNoHandler   = errors.New("no handler for topic")
	errOverclaimed = errors.New("claimed more often than allowed without finishing")
)

// Relay delivers the messages of a [Store] to the [Handler] of their topic.
//
// [Relay.Run] runs a Watermill router fed by a subscriber that claims due
// messages in batches; [Relay.Drain] delivers what is due in one synchronous
// pass. Both run each handler under the same middleware (panic recovery and
// [RelayConfig.Timeout]) and map its outcome to the store the same way: a
// success is acknowledged, an error is retried after [Backoff], and a
// message is buried once it has failed [RelayConfig.MaxAttempts] times, when
// its topic has no handler, or when it was claimed more often than that
// without finishing, since it may be what crashes the relay.
type Relay struct {
	store    Store
	handlers map[string]Handler
	cfg      RelayConfig
	now      func() time.Time
	log      *slog.Logger
	meter    metric.MeterProvider
	metrics  *relayMetrics
	chain    message.HandlerFunc
	// unobserve stops the backlog gauge's callback.
	unobserve func()
}

// RelayOption configures a [Relay].
type RelayOption func(*Relay)

// WithClock makes the relay read the time from now instead of time.Now.
func WithClock(now func() time.Time) RelayOption {
	return func(r *Relay) { r.now = now }
}

// WithLogger makes the relay log to l instead of discarding its logs.
func WithLogger(l *slog.Logger) RelayOption {
	return func(r *Relay) { r.log = l }
}

// WithMeterProvider makes the relay record its metrics with mp.
func WithMeterProvider(mp metric.MeterProvider) RelayOption {
	return func(r *Relay) { r.meter = mp }
}

// NewRelay returns a relay that delivers the messages of store to handlers,
// keyed by topic. Zero fields of cfg take their defaults; a config that still
// cannot work is an error.
func NewRelay(store Store, handlers map[string]Handler, cfg RelayConfig, opts ...RelayOption) (*Relay, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Relay{
		store:    store,
		handlers: make(map[string]Handler, len(handlers)),
		cfg:      cfg,
		now:      time.Now,
		log:      slog.New(slog.DiscardHandler),
		meter:    noop.NewMeterProvider(),
	}
	for topic, h := range handlers {
		if h == nil {
			return nil, fmt.Errorf("outbox: nil handler for topic %q", topic)
		}
		r.handlers[topic] = h
	}
	for _, o := range opts {
		o(r)
	}
	m, err := newRelayMetrics(r.meter)
	if err != nil {
		return nil, err
	}
	if r.unobserve, err = m.observeBacklog(store, r.now); err != nil {
		return nil, err
	}
	r.metrics = m
	// Recoverer runs inside the timeout's goroutine, so that a panic there is
	// recovered too.
	r.chain = enforceTimeout(cfg.Timeout)(middleware.Recoverer(r.dispatch))
	return r, nil
}

// Close stops reporting the relay's metrics. A closed relay still runs.
func (r *Relay) Close() error {
	r.unobserve()
	return nil
}

// Run delivers messages until ctx is done. Deliveries in flight then finish,
// within [RelayConfig.Timeout], and are settled; a message claimed but not
// settled is claimed again when its lease ends, so nothing is lost.
func (r *Relay) Run(ctx context.Context) error {
	router, err := message.NewRouter(message.RouterConfig{
		CloseTimeout: r.cfg.Timeout + settleTimeout,
	}, watermill.NewSlogLoggerWithLevelMapping(r.log, map[slog.Level]slog.Level{
		slog.LevelInfo: slog.LevelDebug,
	}))
	if err != nil {
		return fmt.Errorf("outbox: router: %w", err)
	}
	router.AddConsumerHandler("outbox-relay", routerTopic, newSubscriber(r), r.process)
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("outbox: relay: %w", err)
	}
	return nil
}

// DrainStats counts what one [Relay.Drain] did.
type DrainStats struct {
	Claimed, Delivered, Retried, Buried int
}

// Drain delivers the messages due now, one at a time, batch after batch,
// until a claim returns fewer than [RelayConfig.Batch]. It is the relay's
// synchronous pass, for operators and tests.
//
// Handlers run on a context that ctx's end does not cancel, bounded by
// [RelayConfig.Timeout]: when ctx ends, the delivery in flight finishes and
// the rest of the batch is released, due again at once. So is the rest of a
// batch whose lease has no longer room for one more delivery.
func (r *Relay) Drain(ctx context.Context) (DrainStats, error) {
	var stats DrainStats
	for ctx.Err() == nil {
		claimed := r.now()
		msgs, err := r.store.Claim(ctx, claimed, r.cfg.Lease, r.cfg.Batch)
		if err != nil {
			return stats, err
		}
		stats.Claimed += len(msgs)
		leaseEnd := claimed.Add(r.cfg.Lease)
		delivered := make([]uuid.UUID, 0, len(msgs))
		released := false
		for i, m := range msgs {
			// A delivery may take Timeout; start one only while the lease
			// has that much left. Lease > Timeout, so the first always runs.
			if ctx.Err() != nil || leaseEnd.Sub(r.now()) < r.cfg.Timeout {
				r.release(ctx, msgs[i:])
				released = true
				break
			}
			wm := toWatermill(m, leaseEnd)
			wm.SetContext(context.WithoutCancel(ctx))
			if err := r.process(wm); err != nil {
				r.log.ErrorContext(ctx, "outbox: settle", "id", m.ID, "topic", m.Topic, "error", err)
			}
			switch wm.Metadata.Get(metadataOutcome) {
			case outcomeDelivered:
				delivered = append(delivered, m.ID)
			case outcomeRetried:
				stats.Retried++
			case outcomeBuried:
				stats.Buried++
			}
		}
		if err := r.ack(ctx, delivered); err != nil {
			return stats, err
		}
		stats.Delivered += len(delivered)
		// Released messages are due at once: claiming again would only
		// take them back, so the pass ends here.
		if released || len(msgs) < r.cfg.Batch {
			break
		}
	}
	return stats, ctx.Err()
}

// release makes claimed messages that were not handed to a handler due
// again at once, instead of when their lease ends.
func (r *Relay) release(ctx context.Context, msgs []Message) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	now := r.now()
	for _, m := range msgs {
		if err := r.store.Retry(ctx, m.ID, now, "released undelivered: the relay stopped"); err != nil {
			r.log.WarnContext(ctx, "outbox: release", "id", m.ID, "error", err)
		}
	}
}

// dispatch runs the handler of the message's topic. It is the innermost
// Watermill handler of the relay's middleware chain.
func (r *Relay) dispatch(wm *message.Message) ([]*message.Message, error) {
	m, err := fromWatermill(wm)
	if err != nil {
		return nil, err
	}
	h, ok := r.handlers[m.Topic]
	if !ok {
		return nil, fmt.Errorf("%w %q", errNoHandler, m.Topic)
	}
	return nil, h(wm.Context(), m)
}

// process is the router's handler: it delivers one claimed message and
// records a failure in the store. It marks the message with its outcome; the
// caller acknowledges the delivered ones together with the rest of their
// batch. An error means the outcome could not be recorded; the message's
// lease then brings it back.
func (r *Relay) process(wm *message.Message) error {
	m, err := fromWatermill(wm)
	if err != nil {
		return err
	}
	leaseEnd, err := time.Parse(time.RFC3339Nano, wm.Metadata.Get(MetadataLeaseEnd))
	if err != nil {
		return fmt.Errorf("outbox: message %s lease end: %w", m.ID, err)
	}
	var failure error
	if m.Attempts > r.cfg.MaxAttempts {
		failure = fmt.Errorf("%w (%d claims, %d allowed)", errOverclaimed, m.Attempts, r.cfg.MaxAttempts)
	} else {
		_, failure = r.chain(wm)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(wm.Context()), settleTimeout)
	defer cancel()
	if failure == nil {
		wm.Metadata.Set(metadataOutcome, outcomeDelivered)
		r.metrics.delivered.Add(ctx, 1, topicAttr(m.Topic))
		return nil
	}
	if !r.now().Before(leaseEnd) {
		// Another relay may hold the message now; recording this failure
		// would cut its lease short. The message is due again anyway.
		r.log.WarnContext(ctx, "outbox: lease ended before the failure was recorded; the message is due again",
			"id", m.ID, "topic", m.Topic, "error", failure)
		return nil
	}
	outcome, err := r.fail(ctx, m, failure)
	if err != nil {
		return err
	}
	wm.Metadata.Set(metadataOutcome, outcome)
	return nil
}

// fail retries m after its backoff or buries it, and returns which.
func (r *Relay) fail(ctx context.Context, m Message, failure error) (string, error) {
	reason := failure.Error()
	var p middleware.RecoveredPanicError
	if errors.As(failure, &p) {
		reason = fmt.Sprintf("panic: %v", p.V)
		r.log.ErrorContext(ctx, "outbox: handler panicked", "id", m.ID, "topic", m.Topic, "panic", p.V, "stack", p.Stacktrace)
	}
	bury := errors.Is(failure, errNoHandler) || errors.Is(failure, errOverclaimed) || m.Attempts >= r.cfg.MaxAttempts
	if bury {
		if err := r.store.Bury(ctx, m.ID, reason); err != nil {
			return "", err
		}
		r.metrics.buried.Add(ctx, 1, topicAttr(m.Topic))
		r.log.ErrorContext(ctx, "outbox: message buried", "id", m.ID, "topic", m.Topic, "attempts", m.Attempts, "reason", reason)
		return outcomeBuried, nil
	}
	at := r.now().Add(Backoff(m.Attempts))
	if err := r.store.Retry(ctx, m.ID, at, reason); err != nil {
		return "", err
	}
	r.metrics.retried.Add(ctx, 1, topicAttr(m.Topic))
	r.log.WarnContext(ctx, "outbox: delivery failed, will retry", "id", m.ID, "topic", m.Topic, "attempts", m.Attempts, "retry_at", at, "reason", reason)
	return outcomeRetried, nil
}

// ack removes delivered messages, in one call when the store can.
func (r *Relay) ack(ctx context.Context, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if b, ok := r.store.(BatchAcker); ok {
		return b.AckAll(ctx, ids)
	}
	for _, id := range ids {
		if err := r.store.Ack(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// toWatermill returns m as a Watermill message, with its topic, attempts,
// creation and the end of the lease under which it was claimed.
func toWatermill(m Message, leaseEnd time.Time) *message.Message {
	wm := message.NewMessage(m.ID.String(), m.Payload)
	wm.Metadata.Set(MetadataTopic, m.Topic)
	wm.Metadata.Set(MetadataAttempts, strconv.Itoa(m.Attempts))
	wm.Metadata.Set(MetadataCreatedAt, m.CreatedAt.Format(time.RFC3339Nano))
	wm.Metadata.Set(MetadataLeaseEnd, leaseEnd.Format(time.RFC3339Nano))
	return wm
}

func fromWatermill(wm *message.Message) (Message, error) {
	id, err := uuid.Parse(wm.UUID)
	if err != nil {
		return Message{}, fmt.Errorf("outbox: message id %q: %w", wm.UUID, err)
	}
	attempts, err := strconv.Atoi(wm.Metadata.Get(MetadataAttempts))
	if err != nil {
		return Message{}, fmt.Errorf("outbox: message %s attempts: %w", id, err)
	}
	created, err := time.Parse(time.RFC3339Nano, wm.Metadata.Get(MetadataCreatedAt))
	if err != nil {
		return Message{}, fmt.Errorf("outbox: message %s created_at: %w", id, err)
	}
	return Message{
		ID:        id,
		Topic:     wm.Metadata.Get(MetadataTopic),
		Payload:   wm.Payload,
		CreatedAt: created,
		Attempts:  attempts,
	}, nil
}
