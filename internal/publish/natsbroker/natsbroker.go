package natsbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DefaultDuplicateWindow is the stream's duplicate window when [Config]
// gives none: twice the relay's longest wait between two tries of a message
// (the five-minute backoff ceiling), so that a message published whose
// acknowledgement was lost is dropped as a repeat when it is sent again.
const DefaultDuplicateWindow = 10 * time.Minute

// Config says where to publish.
type Config struct {
	// URLs are the servers, "nats://host:port" separated by commas.
	URLs string
	// Stream is the name of the stream the messages are stored in.
	Stream string
	// Subjects are the stream's subjects, such as "accounts.>". A stream
	// that exists is given those it lacks.
	Subjects []string
	// DuplicateWindow is how long the stream remembers a Nats-Msg-Id. A
	// stream that exists with a shorter window is given this one; zero
	// means [DefaultDuplicateWindow].
	DuplicateWindow time.Duration
	// Log receives a line when the stream is created or changed; nil
	// discards it.
	Log *slog.Logger
	// TracerProvider makes the span of each publish; nil means
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

// Validate reports what in c cannot work.
func (c Config) Validate() error {
	var errs []error
	urls := strings.Split(c.URLs, ",")
	if strings.TrimSpace(c.URLs) == "" {
		errs, urls = append(errs, errors.New("no server URL")), nil
	}
	for i, raw := range urls {
		// The parse error would repeat the URL, password and all.
		u, err := url.Parse(strings.TrimSpace(raw))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("server URL %d of %d is not a URL", i+1, len(urls)))
		case u.Scheme != "nats" && u.Scheme != "tls":
			errs = append(errs, fmt.Errorf("server URL %d: scheme must be nats or tls, got %q", i+1, u.Scheme))
		case u.Hostname() == "" || u.Port() == "":
			errs = append(errs, fmt.Errorf("server URL %d: want nats://host:port", i+1))
		}
	}
	if c.Stream == "" || strings.ContainsAny(c.Stream, " .*>\t\r\n") {
		errs = append(errs, fmt.Errorf("stream name %q must be non-empty without spaces, dots, * or >", c.Stream))
	}
	if len(c.Subjects) == 0 {
		errs = append(errs, errors.New("no stream subject"))
	}
	if c.DuplicateWindow < 0 {
		errs = append(errs, fmt.Errorf("duplicate window must not be negative, got %s", c.DuplicateWindow))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("natsbroker: %w", err)
	}
	return nil
}

// Publisher publishes to one JetStream stream. Publish returns once the
// stream has stored each message, or has recognised it as a repeat of one
// stored within the duplicate window. At start, or at the first publish if
// the server could not be reached then, and again after a publish finds no
// stream, it creates the stream or widens it to the configured subjects
// and duplicate window, leaving the rest of an existing stream's
// configuration as its operator set it.
type Publisher struct {
	cfg  Config
	conn *nats.Conn
	js   jetstream.JetStream
	log  *slog.Logger
	tr   trace.Tracer

	// making holds a value while one goroutine makes the stream; the
	// others wait for it, or for their context's end. ready, once the
	// stream is made, lets publishes pass without waiting.
	making chan struct{}
	ready  atomic.Bool
}

var _ message.Publisher = (*Publisher)(nil)

// New returns a publisher to the servers of cfg. The servers need not be
// reachable yet: the connection is made, and made again after it breaks,
// in the background, and a publish fails while there is none.
func New(cfg Config) (*Publisher, error) {
	if cfg.DuplicateWindow == 0 {
		cfg.DuplicateWindow = DefaultDuplicateWindow
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn, err := nats.Connect(cfg.URLs,
		nats.Name("accounts"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		// A publish while disconnected fails at once instead of waiting in
		// a buffer: the outbox is the buffer.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if !c.IsClosed() {
				log.Warn("natsbroker: disconnected; publishes fail until the connection is back", "error", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("natsbroker: reconnected", "server", c.ConnectedUrlRedacted())
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("natsbroker: connect: %w", err)
	}
	js, err := jetstream.New(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("natsbroker: %w", err)
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	p := &Publisher{cfg: cfg, conn: conn, js: js, log: log, tr: tp.Tracer(tracerName), making: make(chan struct{}, 1)}
	// Make the stream ready at start, while nothing waits for it; a
	// server that cannot be reached now is tried again at the first
	// publish.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), prepareTimeout)
		defer cancel()
		if err := p.ensureStream(ctx); err != nil && !conn.IsClosed() {
			log.Warn("natsbroker: stream not ready at start; tried again at the first publish", "stream", cfg.Stream, "error", err)
		}
	}()
	return p, nil
}

// prepareTimeout bounds the making of the stream at start.
const prepareTimeout = 10 * time.Second

// tracerName names the tracer of the publishes: the package's import path.
const tracerName = "github.com/eventsourced/accounts/internal/publish/natsbroker"

// Publish stores each message in the stream under the subject topic, in
// order, on the message's context: the payload as the data, the UUID as
// Nats-Msg-Id, and each metadata entry as a header. It returns at the first
// failure.
//
// When the message's context carries a valid span context, the publish has
// a span of its own, a child of it (kind producer, named "send" and the
// subject), and the message carries that span's W3C trace context in the
// headers traceparent and tracestate (when there is a trace state);
// metadata entries of those names are left out. A publish outside a trace
// adds neither.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	for _, m := range msgs {
		if err := p.publish(topic, m); err != nil {
			return err
		}
	}
	return nil
}

func (p *Publisher) publish(topic string, m *message.Message) (err error) {
	ctx := m.Context()
	nm := nats.NewMsg(topic)
	nm.Data = m.Payload
	for k, v := range m.Metadata {
		if k != headerTraceParent && k != headerTraceState {
			nm.Header.Set(k, v)
		}
	}
	if trace.SpanContextFromContext(ctx).IsValid() {
		var span trace.Span
		ctx, span = p.tr.Start(ctx, "send "+topic,
			trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(
				semconv.MessagingSystemKey.String("nats"),
				semconv.MessagingOperationTypeSend,
				semconv.MessagingOperationName("send"),
				semconv.MessagingDestinationName(topic),
				semconv.MessagingMessageID(m.UUID),
			))
		defer func() {
			if err != nil {
				// The error's type, not its text, as every span of the
				// service keeps (docs/personal-data.md).
				span.SetStatus(codes.Error, "publish failed")
				span.SetAttributes(semconv.ErrorType(err))
			}
			span.End()
		}()
		propagation.TraceContext{}.Inject(ctx, headerCarrier(nm.Header))
	}
	if err := p.ensureStream(ctx); err != nil {
		return err
	}
	_, err = p.js.PublishMsg(ctx, nm, jetstream.WithMsgID(m.UUID), jetstream.WithExpectStream(p.cfg.Stream))
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) {
			p.forgetStream()
		}
		return fmt.Errorf("natsbroker: publish %s to %s: %w", m.UUID, topic, err)
	}
	return nil
}

// ensureStream creates the stream, or gives it the subjects and duplicate
// window it lacks, unless that was done since the last publish that found
// no stream.
func (p *Publisher) ensureStream(ctx context.Context) error {
	if p.ready.Load() {
		return nil
	}
	select {
	case p.making <- struct{}{}:
		defer func() { <-p.making }()
	case <-ctx.Done():
		return fmt.Errorf("natsbroker: wait for the stream %s to be made: %w", p.cfg.Stream, ctx.Err())
	}
	if p.ready.Load() {
		return nil
	}
	s, err := p.js.Stream(ctx, p.cfg.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		_, err = p.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:       p.cfg.Stream,
			Subjects:   p.cfg.Subjects,
			Duplicates: p.cfg.DuplicateWindow,
			Storage:    jetstream.FileStorage,
		})
		if err != nil {
			return fmt.Errorf("natsbroker: create stream %s: %w", p.cfg.Stream, err)
		}
		p.log.Info("natsbroker: stream created", "stream", p.cfg.Stream, "subjects", p.cfg.Subjects, "duplicate_window", p.cfg.DuplicateWindow)
	case err != nil:
		return fmt.Errorf("natsbroker: look up stream %s: %w", p.cfg.Stream, err)
	default:
		sc := s.CachedInfo().Config
		changed := false
		for _, subj := range p.cfg.Subjects {
			if !slices.Contains(sc.Subjects, subj) {
				sc.Subjects, changed = append(sc.Subjects, subj), true
			}
		}
		// JetStream wants the window no longer than the stream keeps
		// its messages.
		window := p.cfg.DuplicateWindow
		if sc.MaxAge > 0 && sc.MaxAge < window {
			p.log.Warn("natsbroker: the stream keeps messages for less than the duplicate window; repeats published later than that are not dropped",
				"stream", p.cfg.Stream, "max_age", sc.MaxAge, "duplicate_window", window)
			window = sc.MaxAge
		}
		if sc.Duplicates < window {
			sc.Duplicates, changed = window, true
		}
		if changed {
			if _, err := p.js.UpdateStream(ctx, sc); err != nil {
				return fmt.Errorf("natsbroker: update stream %s: %w", p.cfg.Stream, err)
			}
			p.log.Info("natsbroker: stream updated", "stream", p.cfg.Stream, "subjects", sc.Subjects, "duplicate_window", sc.Duplicates)
		}
	}
	p.ready.Store(true)
	return nil
}

func (p *Publisher) forgetStream() { p.ready.Store(false) }

// Connected reports whether the publisher is connected to a server now.
// While it is not, it reconnects in the background and each publish fails
// at once.
func (p *Publisher) Connected() bool { return p.conn.IsConnected() }

// Close closes the connection.
func (p *Publisher) Close() error {
	p.conn.Close()
	return nil
}
