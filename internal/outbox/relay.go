package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/eventsourced/accounts/internal/routerlog"
)

// Metadata keys of the Watermill messages a relay hands to its router.
const (
	MetadataTopic    = "outbox_topic"
	MetadataAttempts = "outbox_attempts"
)

// Outcomes of one delivery.
const (
	outcomeDelivered = "delivered"
	outcomeRetried   = "retried"
	outcomeBuried    = "buried"
	// outcomeLost is a delivery whose outcome was not recorded: its lease
	// was lost, or the store could not be reached. The message is due again
	// when its lease ends.
	outcomeLost = "lost"
	// outcomeRunning is a delivery of [Relay.Drain] whose handler had not
	// returned at its timeout; it is settled once it returns.
	outcomeRunning = "running"
	// outcomeReleased is a delivery cut short by the end of a stop's grace
	// ([WithStopGrace]): its message is due again at once, its attempt
	// given back.
	outcomeReleased = "released"
)

// routerTopic is the one topic the relay's subscriber serves: it claims
// messages of every outbox topic, and the relay dispatches them by their
// [MetadataTopic], so that a topic without a handler is buried, not ignored.
const routerTopic = "outbox"

// abandonGrace is how long [Relay.Drain] waits past a handler's timeout for
// it to return before it goes on without it.
const abandonGrace = 100 * time.Millisecond

var (
	errNoHandler   = errors.New("no handler for topic")
	errOverclaimed = errors.New("claimed more often than allowed without finishing")
)

// Relay delivers the messages of a [Store] to the [Handler] of their topic.
//
// [Relay.Run] runs a Watermill router fed by a subscriber that claims due
// messages in batches; [Relay.Drain] delivers what is due in one synchronous
// pass. Both run each handler under the same middleware (panic recovery)
// and map its outcome to the store the same way: a success is acknowledged,
// an error is retried after [Backoff], and a message is buried once its
// topic's [RetryPolicy] is spent ([RelayConfig.MaxAttempts] failures unless
// [WithRetryPolicy] says otherwise), when its topic has no handler, or when
// it was claimed again after its policy was spent without finishing, since
// it may be what crashes the relay.
//
// A relay keeps these promises:
//
//   - No message is handled by two of its goroutines at once while its lease
//     holds. A handler's context ends at [RelayConfig.Timeout]; a handler
//     that goes on regardless keeps its message leased, and the message is
//     not tried again until the handler has returned (its outcome is then
//     recorded) or the lease has ended. A handler still running then is
//     counted in outbox.overran and logged with the message ID.
//   - Every outcome is recorded under the claim's [Lease], so a relay that
//     has lost its claim changes nothing, whatever its clock says.
//   - A relay holds at most 4×[RelayConfig.Batch] messages claimed and not
//     yet settled: it claims the next batch while the previous ones are
//     delivered and their acknowledgements written, and claims only when a
//     whole batch fits. Abandoned handlers keep their place, so they cannot
//     pile up.
//   - A delivered message is acknowledged at once, with whatever else was
//     delivered meanwhile, never waiting for the slowest of its batch; a
//     valid [RelayConfig] leaves every lease [SettleTimeout] to record the
//     outcome of a delivery that took the whole timeout.
//   - While every delivery of a topic fails, a circuit breaker stops
//     claiming that topic's messages, so that an outage does not spend their
//     attempts; see [breakers].
type Relay struct {
	store    Store
	handlers map[string]Handler
	cfg      RelayConfig
	now      func() time.Time
	log      *slog.Logger
	meter    metric.MeterProvider
	metrics  *relayMetrics
	breakers *breakers
	policies map[string]RetryPolicy
	// stopGrace bounds the deliveries in flight once Run's context ends;
	// zero leaves them their timeout.
	stopGrace time.Duration
	freed     *freed
	room      *room
	inflight  inflight
	chain     message.HandlerFunc
	// claimsFailing is set while claims fail, so that only the first
	// failure of a run is logged at error.
	claimsFailing atomic.Bool
	// claimErr is the error of the latest claim while claims fail, nil
	// otherwise.
	claimErr atomic.Pointer[error]
	// unobserve stops the gauges' callback.
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

// WithStopGrace bounds how long the deliveries in flight may go on once the
// context of [Relay.Run] has ended: past d, their handlers' contexts end
// too. A delivery that then fails, as a handler whose context ended does,
// is released, like a message claimed and never handed over: it is due
// again at once and the attempt its claim counted is given back, so a stop
// spends no attempt. One that succeeds is acknowledged. A handler that
// ignores its context past d and [SettleTimeout] more is left behind, its
// message leased until its lease ends, and Run returns without it. Without
// this option, or with d zero, deliveries in flight have their whole
// [RelayConfig.Timeout].
func WithStopGrace(d time.Duration) RelayOption {
	return func(r *Relay) { r.stopGrace = max(d, 0) }
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
		room:     newRoom(4 * cfg.Batch),
		freed:    newFreed(),
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
	for _, o := range opts {
		o(r)
	}
	for topic, p := range r.policies {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("outbox: retry policy of %q: %w", topic, err)
		}
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
	r.chain = middleware.Recoverer(r.dispatch)
	return r, nil
}

// ErrCannotClaim is returned by [Relay.Ready] while the relay's claims fail.
var ErrCannotClaim = errors.New("outbox: the relay cannot claim messages")

// Ready returns nil unless the relay's latest claim failed, and then an
// error wrapping [ErrCannotClaim] and the claim's error, until a claim
// succeeds again. A relay that has not claimed yet is ready.
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
// timeout have returned and their outcomes are recorded. It returns ctx's
// error if ctx ends first.
func (r *Relay) Wait(ctx context.Context) error {
	return r.room.wait(ctx)
}

// Run delivers messages until ctx is done. It then claims no more.
// Deliveries in flight finish, within [RelayConfig.Timeout] or the grace of
// [WithStopGrace], and are settled; a message claimed but not handed to its
// handler is released, due again at once with its attempt given back, and
// one whose outcome could not be recorded is claimed again when its lease
// ends, so nothing is lost.
func (r *Relay) Run(ctx context.Context) error {
	left := r.cfg.Timeout
	if r.stopGrace > 0 {
		left = min(left, r.stopGrace)
	}
	router, err := message.NewRouter(message.RouterConfig{
		CloseTimeout: left + SettleTimeout,
	}, routerlog.New(r.log))
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
	a := newAcker(r)
	sub := newSubscriber(r)
	if r.stopGrace > 0 {
		sub.cut = cut
	}
	router.AddConsumerHandler("outbox-relay", routerTopic, sub, func(wm *message.Message) error {
		if h := heldFrom(wm.Context()); h != nil {
			r.deliver(wm, h, a.add)
		}
		return nil
	})
	go a.run()
	err = router.Run(ctx)
	a.stop()
	if err != nil {
		return fmt.Errorf("outbox: relay: %w", err)
	}
	return nil
}

// DrainStats counts what one [Relay.Drain] did.
type DrainStats struct {
	Claimed, Delivered, Retried, Buried int
	// Running counts the deliveries whose handler had not returned at its
	// timeout: their messages stay leased until the handler returns, and
	// [Relay.Wait] waits for them.
	Running int
}

// Drain delivers the messages due now, one at a time, batch after batch,
// until a claim returns fewer than [RelayConfig.Batch] and settles no keyed
// message ([Message.Key]) whose successor could now be due. It is the
// relay's synchronous pass, for operators and tests.
//
// Handlers run on a context that ctx's end does not cancel, bounded by
// [RelayConfig.Timeout]: when ctx ends, the delivery in flight finishes and
// the rest of the batch is released, due again at once. So is the rest of a
// batch whose lease has no longer room for one more delivery and its
// settling. A handler that has not returned shortly after its timeout is
// left running, its message leased, and the pass goes on without it.
func (r *Relay) Drain(ctx context.Context) (DrainStats, error) {
	var stats DrainStats
	var cur cursor
	for ctx.Err() == nil {
		// Keyed messages settled by the last batch may have let others of
		// their keys become due, perhaps behind the cursor.
		freedKeys := false
		cur.rewind(r.freed.take())
		r.inflight.sweep(r.now(), r.reportOverran)
		n := r.room.take(r.cfg.Batch)
		if n == 0 {
			r.log.WarnContext(ctx, "outbox: every place is held by a handler still running; the pass ends")
			break
		}
		c, full, err := r.claim(ctx, n, &cur)
		stats.Claimed += len(c.msgs)
		released := false
		for i, h := range c.msgs {
			// A delivery may take Timeout and its settling SettleTimeout;
			// start one only while the lease has that much left. A valid
			// config leaves the first that much when the claim is made, so
			// the first always starts.
			if ctx.Err() != nil || (i > 0 && h.lease.Until.Sub(r.now()) < r.cfg.Timeout+SettleTimeout) {
				r.release(ctx, c.msgs[i:])
				released = true
				break
			}
			outcome := r.drainOne(ctx, h)
			if h.msg.Key != "" && (outcome == outcomeDelivered || outcome == outcomeBuried) {
				freedKeys = true
			}
			switch outcome {
			case outcomeDelivered:
				stats.Delivered++
			case outcomeRetried:
				stats.Retried++
			case outcomeBuried:
				stats.Buried++
			case outcomeRunning:
				stats.Running++
			}
		}
		if err != nil {
			return stats, err
		}
		// Released messages are due at once: claiming again would only
		// take them back, so the pass ends here. A short claim ends it
		// too, unless a keyed message was settled: the next of its key
		// may be due now.
		if released || (!full && !freedKeys) {
			break
		}
	}
	return stats, ctx.Err()
}

// drainOne delivers h for Drain and returns its outcome, or outcomeRunning
// when its handler is still running shortly after its timeout: it is then
// settled, and its place given back, once the handler returns.
func (r *Relay) drainOne(ctx context.Context, h *held) string {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
	wm := r.toWatermill(h, hctx)
	done := make(chan string, 1)
	go func() {
		defer cancel()
		done <- r.deliver(wm, h, r.ackNow)
	}()
	wait := time.NewTimer(r.cfg.Timeout + abandonGrace)
	defer wait.Stop()
	select {
	case outcome := <-done:
		return outcome
	case <-wait.C:
		r.log.WarnContext(ctx, "outbox: handler did not return at its timeout; its message stays leased until it does or the lease ends",
			"id", h.msg.ID, "topic", h.msg.Topic, "timeout", r.cfg.Timeout)
		return outcomeRunning
	}
}

// cursor is where a relay's next claim starts its scan of the due
// messages. While claims come back full, a backlog is being drained: each
// claim starts at the earliest creation time among what the previous one
// took, which is no later than the earliest due time among them, rather than
// at the head of the due index. On PostgreSQL that head fills with dead
// versions of the messages already claimed and acknowledged, which every
// claim would otherwise step over, and which a long transaction anywhere on
// the server (one that holds the xmin horizon) keeps from being cleaned, so
// that draining a backlog would cost the square of its length.
//
// A message can become due below the cursor: one added by a transaction that
// began before the cursor's time and committed later, one whose topic's
// breaker just closed, one whose lease ended after its relay died. So the
// cursor is dropped whenever a claim comes back short, whenever the topics
// left out change, and at least once every [RelayConfig.Interval].
type cursor struct {
	from   time.Time
	except []string
	// reset is when the cursor was last dropped.
	reset time.Time
}

// scope returns the scope of the next claim at now leaving out except.
func (c *cursor) scope(now time.Time, except []string, interval time.Duration) Scope {
	if !slices.Equal(except, c.except) || now.Sub(c.reset) >= interval || now.Before(c.reset) {
		c.from, c.except, c.reset = time.Time{}, except, now
	}
	return Scope{Except: except, From: c.from}
}

// advance moves the cursor after a claim that took msgs and was full or not.
func (c *cursor) advance(msgs []Message, full bool) {
	if !full || len(msgs) == 0 {
		c.from = time.Time{}
		return
	}
	from := msgs[0].CreatedAt
	for _, m := range msgs[1:] {
		if m.CreatedAt.Before(from) {
			from = m.CreatedAt
		}
	}
	c.from = from
}

// claim claims up to limit messages at the relay's now: first one message
// of each topic whose breaker lets a probe through, then due messages of
// the topics whose breakers are closed, from where cur says. full reports
// whether more may be due: that second claim took all it was asked for, or
// started from a cursor, or a probe was claimed. Each message takes a place of the room the caller took for limit;
// the places of what was not claimed are given back.
func (r *Relay) claim(ctx context.Context, limit int, cur *cursor) (c *claim, full bool, err error) {
	now := r.now()
	c = &claim{until: now.Add(r.cfg.Lease)}
	var msgs []Message
	// A claim runs to its end even when ctx ends meanwhile: cut short, its
	// statement may have leased messages that nobody would hold until the
	// lease ends, their attempts spent. The caller releases what it took.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), SettleTimeout)
	defer cancel()
	probe, except := r.breakers.plan(now)
	for _, topic := range probe {
		if len(msgs) == limit {
			break
		}
		got, err := r.store.Claim(WithScope(sctx, Scope{Only: []string{topic}}), now, r.cfg.Lease, 1)
		if err != nil {
			r.claimFailed(ctx, err)
			return r.hold(c, msgs, limit), false, err
		}
		id := uuid.Nil
		if len(got) > 0 {
			id = got[0].ID
		}
		r.breakers.probing(topic, id, now)
		msgs = append(msgs, got...)
	}
	// Once a probe is delivered its topic flows again: claim again then.
	probed := len(msgs) > 0
	if want := limit - len(msgs); want > 0 {
		scope := cur.scope(now, except, r.cfg.Interval)
		got, err := r.store.Claim(WithScope(sctx, scope), now, r.cfg.Lease, want)
		if err != nil {
			cur.advance(nil, false)
			r.claimFailed(ctx, err)
			return r.hold(c, msgs, limit), false, err
		}
		r.claimSucceeded(ctx)
		full = len(got) == want
		cur.advance(got, full)
		// A short claim from a cursor may have missed messages due before
		// it: the cursor is dropped, and the caller claims again.
		full = full || !scope.From.IsZero() || probed
		msgs = append(msgs, got...)
	}
	return r.hold(c, msgs, limit), full, nil
}

// claimFailed counts a failed claim, and logs the first of a run of them at
// error and the others at debug, so that a database that is away for an hour
// does not fill the log; [Relay.claimSucceeded] ends the run.
func (r *Relay) claimFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	r.metrics.storeError(ctx, opClaim)
	r.claimErr.Store(&err)
	if r.claimsFailing.CompareAndSwap(false, true) {
		r.log.ErrorContext(ctx, "outbox: claim failed; the relay tries again at each poll (outbox.store.errors counts the failures)", "error", err)
		return
	}
	r.log.DebugContext(ctx, "outbox: claim failed again", "error", err)
}

// claimSucceeded ends a run of failed claims.
func (r *Relay) claimSucceeded(ctx context.Context) {
	r.claimErr.Store(nil)
	if r.claimsFailing.CompareAndSwap(true, false) {
		r.log.InfoContext(ctx, "outbox: claims succeed again")
	}
}

// hold makes c of the claimed msgs, gives back the places of limit that
// they do not take, and lists c as in flight.
func (r *Relay) hold(c *claim, msgs []Message, limit int) *claim {
	r.room.give(limit - len(msgs))
	if len(msgs) == 0 {
		return c
	}
	c.msgs = make([]*held, len(msgs))
	for i, m := range msgs {
		c.msgs[i] = &held{msg: m, lease: Lease{ID: m.ID, Attempts: m.Attempts, Until: c.until}, claim: c}
	}
	c.left.Store(int64(len(msgs)))
	r.inflight.add(c)
	return c
}

// settled gives back h's place once its outcome is recorded, or given up.
func (r *Relay) settled(h *held) {
	h.returned.Store(true)
	if h.claim.left.Add(-1) == 0 && h.claim.cancel != nil {
		h.claim.cancel()
	}
	r.room.give(1)
}

// release makes claimed messages that were not handed to a handler due
// again at once, instead of when their lease ends, and gives back the
// attempts their claim counted.
func (r *Relay) release(ctx context.Context, hs []*held) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), SettleTimeout)
	defer cancel()
	now := r.now()
	for _, h := range hs {
		l := h.lease
		l.Released = true
		err := r.store.Retry(WithLease(ctx, l), h.msg.ID, now, "released undelivered")
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			r.metrics.storeError(ctx, opRelease)
			r.log.WarnContext(ctx, "outbox: release", "id", h.msg.ID, "error", err)
		}
		r.settled(h)
	}
}

// dispatch runs the handler of the message's topic. It is the innermost
// Watermill handler of the relay's middleware chain.
func (r *Relay) dispatch(wm *message.Message) ([]*message.Message, error) {
	h := heldFrom(wm.Context())
	if h == nil {
		return nil, fmt.Errorf("outbox: message %s was not claimed by this relay", wm.UUID)
	}
	handler, ok := r.handlers[h.msg.Topic]
	if !ok {
		return nil, fmt.Errorf("%w %q", errNoHandler, h.msg.Topic)
	}
	return nil, handler(wm.Context(), h.msg)
}

// deliver runs h's handler under the middleware, on wm's context, and
// records the outcome. A success is handed to ack, which acknowledges it
// and calls [Relay.settled]; any other outcome is recorded here.
func (r *Relay) deliver(wm *message.Message, h *held, ack func(*held)) string {
	m := h.msg
	start := time.Now()
	failure := r.policy(m.Topic).overclaimed(m, r.now)
	if failure == nil {
		_, failure = r.chain(wm)
	}
	h.returned.Store(true)
	ctx := context.WithoutCancel(wm.Context())
	took := time.Since(start)
	if failure == nil {
		// The acknowledgement counts the delivery, with others at once.
		h.took = took
		ack(h)
		return outcomeDelivered
	}
	if cut := h.claim.cut; cut != nil && cut.Err() != nil {
		// The stop's grace ran out: the failure is the stop's, not the
		// destination's, so the breaker hears nothing of it.
		r.log.InfoContext(ctx, "outbox: delivery cut short by the stop; its message is released, due again at once",
			"id", m.ID, "topic", m.Topic, "attempts", m.Attempts-1)
		r.release(ctx, []*held{h})
		return outcomeReleased
	}
	if !errors.Is(failure, errNoHandler) && !errors.Is(failure, errOverclaimed) {
		r.breakers.record(m.Topic, m.ID, false, r.now())
	}
	sctx, cancel := context.WithTimeout(WithLease(ctx, h.lease), SettleTimeout)
	defer cancel()
	outcome := r.fail(sctx, h, failure)
	if outcome != outcomeLost {
		r.metrics.observeDuration(ctx, m.Topic, outcome, took)
	}
	r.settled(h)
	return outcome
}

// fail retries h's message after its backoff or buries it, under its
// lease, and returns which, or outcomeLost when neither was recorded.
func (r *Relay) fail(ctx context.Context, h *held, failure error) string {
	m := h.msg
	reason := failure.Error()
	var p middleware.RecoveredPanicError
	if errors.As(failure, &p) {
		reason = fmt.Sprintf("panic: %v", p.V)
		r.log.ErrorContext(ctx, "outbox: handler panicked", "id", m.ID, "topic", m.Topic, "panic", p.V, "stack", p.Stacktrace)
	}
	bury := errors.Is(failure, errNoHandler) || errors.Is(failure, errOverclaimed) || r.policy(m.Topic).spent(m, r.now)
	if bury {
		if err := r.store.Bury(ctx, m.ID, reason); err != nil {
			return r.notRecorded(ctx, h, opBury, reason, err)
		}
		r.metrics.buried.Add(ctx, 1, r.metrics.topic(m.Topic))
		r.freed.settled(keyedCreated([]*held{h})...)
		r.log.ErrorContext(ctx, "outbox: message buried", "id", m.ID, "topic", m.Topic, "attempts", m.Attempts, "reason", reason)
		return outcomeBuried
	}
	at := r.now().Add(Backoff(m.Attempts))
	if err := r.store.Retry(ctx, m.ID, at, reason); err != nil {
		return r.notRecorded(ctx, h, opRetry, reason, err)
	}
	r.metrics.retried.Add(ctx, 1, r.metrics.topic(m.Topic))
	r.log.WarnContext(ctx, "outbox: delivery failed, will retry", "id", m.ID, "topic", m.Topic, "attempts", m.Attempts, "retry_at", at, "reason", reason)
	return outcomeRetried
}

// notRecorded logs a failure whose outcome the store did not take. The
// message is due again when its lease ends.
func (r *Relay) notRecorded(ctx context.Context, h *held, op, reason string, err error) string {
	m := h.msg
	if errors.Is(err, ErrLeaseLost) {
		r.metrics.leaseLost.Add(ctx, 1, r.metrics.topic(m.Topic))
		r.log.WarnContext(ctx, "outbox: the message was claimed again meanwhile; this delivery's failure is not recorded",
			"id", m.ID, "topic", m.Topic, "attempts", m.Attempts, "reason", reason)
		return outcomeLost
	}
	r.metrics.storeError(ctx, op)
	r.log.ErrorContext(ctx, "outbox: record failed delivery; the message is due again when its lease ends",
		"id", m.ID, "topic", m.Topic, "operation", op, "reason", reason, "error", err)
	return outcomeLost
}

// ackNow acknowledges h at once, in a store call of its own, and gives its
// place back.
func (r *Relay) ackNow(h *held) {
	ctx, cancel := context.WithTimeout(context.Background(), SettleTimeout)
	defer cancel()
	r.delivered(ctx, []*held{h})
	if err := r.ackAll(ctx, []Lease{h.lease}); err != nil {
		r.ackFailed(ctx, 1, err)
	} else {
		r.freed.settled(keyedCreated([]*held{h})...)
	}
	r.settled(h)
}

// delivered counts the deliveries of hs, by topic, and tells the breakers.
// The acknowledger calls it once for what it writes together, rather than
// each delivery's goroutine for its own.
func (r *Relay) delivered(ctx context.Context, hs []*held) {
	now := r.now()
	var topic string
	n := int64(0)
	flush := func() {
		if n > 0 {
			r.metrics.delivered.Add(ctx, n, r.metrics.topic(topic))
		}
	}
	for _, h := range hs {
		if h.msg.Topic != topic {
			flush()
			topic, n = h.msg.Topic, 0
			r.breakers.record(topic, h.msg.ID, true, now)
		}
		n++
		r.metrics.observeDuration(ctx, topic, outcomeDelivered, h.took)
	}
	flush()
}

// ackAll acknowledges delivered messages under their leases, in one call
// when the store can. A failure is counted.
func (r *Relay) ackAll(ctx context.Context, leases []Lease) error {
	var err error
	if b, ok := r.store.(BatchAcker); ok {
		err = b.AckAll(ctx, leases)
	} else {
		for _, l := range leases {
			if err = r.store.Ack(WithLease(ctx, l), l.ID); err != nil {
				break
			}
		}
	}
	if err != nil {
		r.metrics.storeError(ctx, opAck)
	}
	return err
}

// ackFailed logs acknowledgements given up on: their messages are delivered
// again once their leases end.
func (r *Relay) ackFailed(ctx context.Context, n int, err error) {
	r.log.ErrorContext(ctx, "outbox: ack; the messages will be delivered again when their leases end",
		"messages", n, "error", err)
}

// toWatermill returns h as a Watermill message on ctx, with its topic and
// attempts in the metadata, and h itself in the context.
func (r *Relay) toWatermill(h *held, ctx context.Context) *message.Message {
	wm := message.NewMessage(h.msg.ID.String(), h.msg.Payload)
	wm.Metadata.Set(MetadataTopic, h.msg.Topic)
	wm.Metadata.Set(MetadataAttempts, strconv.Itoa(h.msg.Attempts))
	wm.SetContext(context.WithValue(ctx, heldKey{}, h))
	return wm
}
