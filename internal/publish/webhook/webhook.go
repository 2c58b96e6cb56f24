package webhook

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/redact"
)

// ErrBadURL is matched, with [errors.Is], by the error [New] returns for a
// URL that is not an absolute http or https URL with a host.
var ErrBadURL = errors.New("webhook: bad URL")

// ErrBadSecret is matched, with [errors.Is], by the error [New] returns for
// a secret that is not whsec_ followed by the standard base64 of 24 to 64
// bytes.
var ErrBadSecret = errors.New("webhook: bad secret")

const (
	secretPrefix   = "whsec_"
	minSecretBytes = 24
	maxSecretBytes = 64

	// defaultContentType is the Content-Type of a message whose metadata
	// has no "content-type".
	defaultContentType = "application/cloudevents+json"

	userAgent = "accounts-webhook"

	// maxErrorBody is how much of a failed answer's body an error repeats.
	maxErrorBody = 512
	// maxAddress is the longest an email address can be (RFC 5321).
	maxAddress = 254
	// maxDrain is how much of an answer's body is read and thrown away so
	// that the connection can be used again; past it the connection is
	// closed instead.
	maxDrain = 64 << 10
)

// Config is what [New] needs. URL and Secret are required.
type Config struct {
	// URL is where every message is posted: an absolute http or https URL
	// with a host. A user and password in it are sent as basic
	// authentication and are never repeated in an error.
	URL string
	// Secret is the signing secret, whsec_ followed by the standard base64
	// of 24 to 64 random bytes, as the receiver was given it.
	Secret string
	// Client sends the requests. Nil means a client of the publisher's own
	// with timeouts on dialling, TLS and waiting for an answer. Whichever
	// client is used, redirects are never followed: a 3xx answer is a
	// failure, since a signed event must not be forwarded elsewhere.
	Client *http.Client
	// Now is the clock that stamps each attempt. Nil means time.Now.
	Now func() time.Time
	// TracerProvider makes the client span of each request whose message
	// context carries a valid span context; nil means
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

// Publisher is a [message.Publisher] that POSTs each message to one URL. The
// topic is not used: every topic goes to the same URL. It is safe for
// concurrent use. Use [New] to make one.
type Publisher struct {
	url    string
	signer *standardwebhooks.Webhook
	client *http.Client
	own    bool
	now    func() time.Time
}

var _ message.Publisher = (*Publisher)(nil)

// Validate reports a URL or secret that cannot work, as [New] does, with
// errors that match [ErrBadURL] or [ErrBadSecret] and never repeat a
// password of the URL.
func (c Config) Validate() error {
	if err := checkURL(c.URL); err != nil {
		return err
	}
	_, err := decodeSecret(c.Secret)
	return err
}

// New checks cfg and returns a publisher for it. It does not contact the
// endpoint. Its errors match [ErrBadURL] or [ErrBadSecret].
func New(cfg Config) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	key, err := decodeSecret(cfg.Secret)
	if err != nil {
		return nil, err
	}
	// NewWebhookRaw signs with exactly the key checked above; NewWebhook
	// would decode the secret again, and accept ones the spec does not.
	signer, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return nil, &configError{ErrBadSecret, fmt.Sprintf("webhook: secret: %v", err)}
	}
	p := &Publisher{url: cfg.URL, signer: signer, now: cfg.Now}
	if p.now == nil {
		p.now = time.Now
	}
	if cfg.Client == nil {
		p.client = newClient()
		p.own = true
	} else {
		c := *cfg.Client
		p.client = &c
	}
	p.client.CheckRedirect = noRedirect
	p.client.Transport = traced(p.client.Transport, cfg.TracerProvider)
	return p, nil
}

// traced returns rt (nil meaning http.DefaultTransport) wrapped by otelhttp,
// so that a request in a trace has a client span, a child of the span in
// its context, and carries that span's W3C trace context in its
// traceparent and tracestate headers. A request outside a trace passes
// through untouched: no span, no header.
func traced(rt http.RoundTripper, tp trace.TracerProvider) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return otelhttp.NewTransport(rt,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithFilter(func(r *http.Request) bool {
			return trace.SpanContextFromContext(r.Context()).IsValid()
		}),
	)
}

// Publish POSTs each message's payload, in order, on the message's context,
// and returns at the first failure. A 2xx answer is success; any other
// status, a transport error or the context's end is an error that names the
// message and, for an answer, its status and the start of its body. topic is
// not used.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	for _, msg := range msgs {
		if err := p.post(msg); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the idle connections of the publisher's own client; it leaves
// a client given in [Config] alone. The publisher can still be used after
// it, with new connections.
func (p *Publisher) Close() error {
	if p.own {
		p.client.CloseIdleConnections()
	}
	return nil
}

func (p *Publisher) post(msg *message.Message) error {
	id := msg.UUID
	if id == "" {
		return errors.New("webhook: post: message has no UUID to send as webhook-id")
	}
	ts := p.now()
	sig, err := p.signer.Sign(id, ts, msg.Payload)
	if err != nil {
		return fmt.Errorf("webhook: sign %s: %w", id, err)
	}
	req, err := http.NewRequestWithContext(msg.Context(), http.MethodPost, p.url, bytes.NewReader(msg.Payload))
	if err != nil {
		// The URL was checked in New, so this is a bad method or context;
		// keep the URL, and its password, out of the error all the same.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("webhook: post %s: %w", id, err)
	}
	contentType := msg.Metadata.Get("content-type")
	if contentType == "" {
		contentType = defaultContentType
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(standardwebhooks.HeaderWebhookID, id)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)

	// The client's *url.Error shows the URL with its password redacted.
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: post %s: %w", id, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	// An endpoint may quote the event it refused, and the event may name
	// a person; the error goes to the log and the stored reason. The
	// answer is redacted before it is cut, so that an address the cut
	// falls in is still whole, and known for one, when it is redacted.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+maxAddress))
	quoted := redact.Addresses(string(head))
	quoted = quoted[:min(len(quoted), maxErrorBody)]
	var b strings.Builder
	fmt.Fprintf(&b, "webhook: post %s: %s", id, resp.Status)
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		b.WriteString(" (redirects are not followed)")
	}
	if len(quoted) > 0 {
		fmt.Fprintf(&b, ": %s", strconv.Quote(quoted))
	}
	return errors.New(b.String())
}

func noRedirect(*http.Request, []*http.Request) error {
	return http.ErrUseLastResponse
}

func newClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	t.ResponseHeaderTimeout = 30 * time.Second
	t.ExpectContinueTimeout = time.Second
	t.IdleConnTimeout = 90 * time.Second
	// Every request goes to one host: keep more than the default two idle
	// connections to it, so that concurrent publishers reuse them.
	t.MaxIdleConnsPerHost = 32
	return &http.Client{Transport: t, Timeout: time.Minute}
}

// checkURL reports a URL that cannot serve. Its errors never quote the URL
// or a piece of it: a password with a /, ? or # that is not
// percent-encoded ends the userinfo early, and the parser's errors (or the
// port it then finds) repeat what follows, which is the password.
func checkURL(raw string) error {
	const encode = " (percent-encode any /, ? or # in a password)"
	u, err := url.Parse(raw)
	if err != nil {
		return &configError{ErrBadURL, "webhook: URL does not parse" + encode}
	}
	switch {
	case u.Scheme == "":
		return &configError{ErrBadURL, "webhook: URL must be absolute, with an http or https scheme"}
	case u.Scheme != "http" && u.Scheme != "https":
		return &configError{ErrBadURL, fmt.Sprintf("webhook: URL must be http or https, not %q", u.Scheme)}
	case u.Opaque != "" || u.Hostname() == "":
		return &configError{ErrBadURL, "webhook: URL has no host"}
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		return &configError{ErrBadURL, "webhook: URL must not have a fragment" + encode}
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return &configError{ErrBadURL, "webhook: URL port is out of range" + encode}
		}
	}
	return nil
}

// decodeSecret returns the key of a whsec_ secret. The library's NewWebhook
// is laxer than the spec: it takes a secret with or without the prefix, of
// any length, even none, and its base64 decoder skips line breaks; so the
// secret is checked here, and must be the canonical encoding of its key.
func decodeSecret(secret string) ([]byte, error) {
	const rule = "webhook: secret must be whsec_ followed by base64 of 24 to 64 bytes"
	rest, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return nil, &configError{ErrBadSecret, rule + ": no whsec_ prefix"}
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || base64.StdEncoding.EncodeToString(key) != rest {
		return nil, &configError{ErrBadSecret, rule + ": not standard base64"}
	}
	if n := len(key); n < minSecretBytes || n > maxSecretBytes {
		return nil, &configError{ErrBadSecret, fmt.Sprintf("%s: got %d bytes", rule, n)}
	}
	return key, nil
}

// configError is an error of [New]: its own message, matching a sentinel.
type configError struct {
	kind error
	msg  string
}

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return e.kind }
