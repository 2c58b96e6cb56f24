package kafkabroker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// MetadataKey is the message metadata entry whose value becomes the record
// key. A message without it is produced with a nil key.
const MetadataKey = "key"

// HeaderID is the record header that carries the message UUID.
const HeaderID = "id"

// The record headers of the W3C trace context of a traced publish.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// tracerName names the tracer of the publishes: the package's import path.
const tracerName = "github.com/eventsourced/accounts/internal/publish/kafkabroker"

// DefaultClientID is the client ID a [Config] without one uses.
const DefaultClientID = "accounts"

// deliveryTimeout bounds how long a record may wait to be produced, retries
// included, when its message context has no earlier deadline. It matches the
// outbox relay's default handler timeout.
const deliveryTimeout = 30 * time.Second

// metadataMinAge is the shortest time between two metadata refreshes.
const metadataMinAge = time.Second

// closeTimeout bounds how long [Publisher.Close] waits for buffered records.
const closeTimeout = deliveryTimeout

var _ message.Publisher = (*Publisher)(nil)

// Config says which cluster a [Publisher] produces to.
type Config struct {
	// Brokers are the seed brokers, each host:port. Any one of them that
	// answers is enough to discover the rest of the cluster.
	Brokers []string
	// ClientID names the client to the brokers (in their logs and quotas).
	// Empty means [DefaultClientID].
	ClientID string
	// TracerProvider makes the span of each publish; nil means
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

func (c *Config) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
}

// Validate reports an empty broker list and every broker address that is
// not host:port with a numeric port.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no brokers"))
	}
	for _, b := range c.Brokers {
		if err := validateAddr(b); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafkabroker: invalid config: %w", err)
	}
	return nil
}

func validateAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("broker %q is not host:port: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("broker %q has no host", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("broker %q has no valid port", addr)
	}
	return nil
}

// Publisher produces Watermill messages as Kafka records. It is safe for
// concurrent use.
type Publisher struct {
	client *kgo.Client
	tr     trace.Tracer
}

// New returns a Publisher for the cluster cfg names. It does not contact the
// cluster: a cluster that is down at start makes [Publisher.Publish] fail
// until it is back, and does not stop the application.
//
// The client is an idempotent producer (franz-go's default, which New never
// disables) whose records are acknowledged only once all in-sync replicas
// have them ([kgo.AllISRAcks], set explicitly). Records with a key are
// partitioned by the murmur2 hash of the key, as Kafka's own clients do, so
// one key always lands in one partition and, with idempotence, in the order
// it was produced.
//
// Produce retries are bounded in time: a record fails once its message
// context ends, or after about 30 seconds when it has no earlier deadline. To keep
// that bound while the cluster is unreachable with a request in flight, the
// client may give up on a record whose request it already sent (see
// [kgo.AllowIdempotentProduceCancellation]); such a record may still have been
// stored, so the outbox's retry of it can land twice. Idempotence still
// removes the duplicates of the client's own retries.
func New(cfg Config) (*Publisher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	client, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// The default partitioner, spelled out: keyed records by
		// murmur2 of the key, unkeyed ones in uniform sticky batches.
		kgo.RecordPartitioner(kgo.UniformBytesPartitioner(64<<10, true, true, nil)),
		// Publish waits for every record, so waiting for more records
		// to join a batch only adds latency; concurrent publishes still
		// share batches while a request is in flight.
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(deliveryTimeout),
		// A produce that fails to reach a broker triggers a metadata
		// refresh, and only then does the client fail the records whose
		// context has ended; the default floor of 5s between refreshes
		// keeps such records, and those queued behind them, that long.
		kgo.MetadataMinAge(metadataMinAge),
		kgo.AllowIdempotentProduceCancellation(),
		// A topic that does not exist is created with the cluster's
		// defaults where the cluster allows it; an operator who wants
		// another partition count creates it first.
		kgo.AllowAutoTopicCreation(),
	)
	if err != nil {
		return nil, fmt.Errorf("kafkabroker: new client: %w", err)
	}
	return &Publisher{client: client, tr: cfg.TracerProvider.Tracer(tracerName)}, nil
}

// Publish produces one record per message to topic and returns once the
// cluster has acknowledged every record or each has failed. A record fails
// when the client gives up on it or when its message's context ends,
// whichever is first: Publish returns at a message's deadline even though
// the client notices a context only when it next retries, which can be
// seconds later while the cluster is unreachable. A record given up on at its
// deadline may still be stored if its request was already sent; until the
// client drops it, later records for the same partition wait behind it and
// fail with it, which keeps each partition free of gaps.
//
// A record's key is the message's [MetadataKey] metadata (nil without it; an
// empty value is an empty key, which is hashed like any other), its value the
// payload, and its headers [HeaderID] with the message UUID followed by every
// other metadata entry in name order. A metadata entry named [HeaderID] is
// left out, so that header always carries the UUID.
//
// When a message's context carries a valid span context, its record has a
// span of its own, a child of it (kind producer, named "send" and the
// topic), from the hand-over to the client until the cluster's answer, and
// the record carries that span's W3C trace context in the headers
// [HeaderTraceParent] and [HeaderTraceState] (when there is a trace state),
// last; metadata entries of those names are left out. A publish outside a
// trace adds neither.
//
// Publish returns the error of the first message, in the order given, that
// failed, wrapped with its UUID.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	results := make([]result, len(msgs))
	for i, msg := range msgs {
		res := &results[i]
		res.done = make(chan struct{})
		ctx, r := msg.Context(), record(topic, msg)
		span := p.startSpan(ctx, topic, msg.UUID)
		if span != nil {
			ctx = trace.ContextWithSpan(ctx, span)
			propagation.TraceContext{}.Inject(ctx, headerCarrier{r})
		}
		p.client.Produce(ctx, r, func(_ *kgo.Record, err error) {
			res.err = err
			endSpan(span, err)
			close(res.done)
		})
	}
	var first error
	for i, msg := range msgs {
		if err := results[i].wait(msg.Context()); err != nil && first == nil {
			first = fmt.Errorf("kafkabroker: produce %s: %w", msg.UUID, err)
		}
	}
	return first
}

// result is the outcome of one record, set by its promise.
type result struct {
	done chan struct{} // closed once err is set
	err  error
}

// wait returns the record's error once the client reports it, or the error
// of ctx once ctx ends, unless the outcome is in by then.
func (r *result) wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.outcome(ctx)
	case <-ctx.Done():
		select {
		case <-r.done:
			return r.outcome(ctx)
		default:
			return ctx.Err()
		}
	}
}

// outcome returns the record's error, saying so when it is the context error
// of another record: the client fails a partition's buffered records with
// the error of the first one.
func (r *result) outcome(ctx context.Context) error {
	if ctx.Err() == nil && (errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded)) {
		return fmt.Errorf("dropped with an earlier record of its partition whose context ended: %w", r.err)
	}
	return r.err
}

func record(topic string, msg *message.Message) *kgo.Record {
	r := &kgo.Record{
		Topic:   topic,
		Value:   msg.Payload,
		Headers: make([]kgo.RecordHeader, 0, len(msg.Metadata)+1),
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderID, Value: []byte(msg.UUID)})
	names := make([]string, 0, len(msg.Metadata))
	for name, value := range msg.Metadata {
		switch name {
		case MetadataKey:
			r.Key = []byte(value)
		case HeaderID, HeaderTraceParent, HeaderTraceState:
		default:
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: name, Value: []byte(msg.Metadata[name])})
	}
	return r
}

// startSpan starts the span of a record for the message id when ctx
// carries a valid span context, and returns nil otherwise.
func (p *Publisher) startSpan(ctx context.Context, topic, id string) trace.Span {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	_, span := p.tr.Start(ctx, "send "+topic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
			semconv.MessagingDestinationName(topic),
			semconv.MessagingMessageID(id),
		))
	return span
}

// endSpan ends span, if any, with the record's outcome.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		// The error's type, not its text, as every span of the service
		// keeps (docs/personal-data.md).
		span.SetStatus(codes.Error, "publish failed")
		span.SetAttributes(semconv.ErrorType(err))
	}
	span.End()
}

// headerCarrier is a propagation.TextMapCarrier that appends to the
// headers of a record.
type headerCarrier struct{ r *kgo.Record }

func (c headerCarrier) Get(key string) string {
	for _, h := range c.r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (c headerCarrier) Set(key, value string) {
	c.r.Headers = append(c.r.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(c.r.Headers))
	for i, h := range c.r.Headers {
		keys[i] = h.Key
	}
	return keys
}

// Close waits up to 30 seconds for records still buffered by concurrent
// calls to [Publisher.Publish], then closes the client, failing any record
// still buffered. It returns the error of that wait, if any.
func (p *Publisher) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := p.client.Flush(ctx)
	p.client.Close()
	if err != nil {
		return fmt.Errorf("kafkabroker: flush: %w", err)
	}
	return nil
}
