package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/eventsourced/accounts/internal/publish/webhook"
	"github.com/eventsourced/accounts/internal/testclock"
)

// secret is a valid signing secret: whsec_ and the base64 of 32 bytes.
var secret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// delivery is one request as a receiver saw it.
type delivery struct {
	method string
	header http.Header
	body   []byte
	// verifyErr is what the library's Verify said of the request.
	verifyErr error
	// signatureErr is what VerifyIgnoringTimestamp said: the signature
	// alone, whatever the timestamp's age.
	signatureErr error
}

// receiver is an httptest server that verifies each request with the
// library and hands it to the test.
type receiver struct {
	*httptest.Server
	got chan delivery
	// conns counts the connections the server accepted.
	conns atomic.Int32
}

// receiverConfig says how a receiver verifies and answers.
type receiverConfig struct {
	// secret verifies the requests; empty means the package's secret.
	secret string
	// tamper, if set, changes the body before it is verified.
	tamper func([]byte) []byte
	// answer writes the answer to the nth request (from 0); nil means 204.
	answer func(w http.ResponseWriter, n int)
}

func newReceiver(t testing.TB, cfg receiverConfig) *receiver {
	t.Helper()
	if cfg.secret == "" {
		cfg.secret = secret
	}
	verifier, err := standardwebhooks.NewWebhook(cfg.secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{got: make(chan delivery, 16)}
	var n atomic.Int32
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			t.Errorf("receiver: read body: %v", err)
		}
		verified := body
		if cfg.tamper != nil {
			verified = cfg.tamper(bytes.Clone(body))
		}
		r.got <- delivery{
			method:       req.Method,
			header:       req.Header.Clone(),
			body:         body,
			verifyErr:    verifier.Verify(verified, req.Header),
			signatureErr: verifier.VerifyIgnoringTimestamp(verified, req.Header),
		}
		if cfg.answer == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		cfg.answer(w, int(n.Add(1)-1))
	}))
	r.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}
	r.Start()
	t.Cleanup(r.Close)
	return r
}

// next returns the receiver's next delivery, failing the test if there is
// none: every Publish that reached the receiver has handed its delivery over
// before it returns, so there is nothing to wait for.
func (r *receiver) next(t *testing.T) delivery {
	t.Helper()
	select {
	case d := <-r.got:
		return d
	default:
		t.Fatal("the receiver got no request")
		return delivery{}
	}
}

func (r *receiver) none(t *testing.T) {
	t.Helper()
	select {
	case d := <-r.got:
		t.Fatalf("the receiver got an unexpected request %s", d.header.Get("webhook-id"))
	default:
	}
}

func newPublisher(t testing.TB, cfg webhook.Config) *webhook.Publisher {
	t.Helper()
	if cfg.Secret == "" {
		cfg.Secret = secret
	}
	p, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// now is a time that the library's Verify, which reads the real clock,
// accepts for the length of a test.
func now() time.Time { return time.Now().Truncate(time.Second) }

func TestSignatureFailsOnTamperedBodyOrWrongSecret(t *testing.T) {
	t.Parallel()
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another secret of 32 bytes long!"))
	for _, tc := range []struct {
		name string
		cfg  receiverConfig
	}{
		{"tampered body", receiverConfig{tamper: func(b []byte) []byte { b[len(b)/2] ^= 1; return b }}},
		{"wrong secret", receiverConfig{secret: other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rcv := newReceiver(t, tc.cfg)
			p := newPublisher(t, webhook.Config{URL: rcv.URL})
			if err := p.Publish("t", message.NewMessage("evt-1", []byte(`{"amount":100}`))); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if err := rcv.next(t).verifyErr; !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
				t.Errorf("Verify = %v, want ErrNoMatchingSignature", err)
			}
		})
	}
}

// hangingReceiver accepts requests and never answers them; started has a
// value for each request it holds. It lets them go when the client hangs up
// or the test ends.
func hangingReceiver(t *testing.T) (srv *httptest.Server, started chan struct{}) {
	started = make(chan struct{}, 1)
	release := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body to its end lets the server notice a hang-up
		// and cancel r.Context.
		_, _ = io.Copy(io.Discard, r.Body)
		started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv, started
}

// BenchmarkPublish posts messages from parallel goroutines to a receiver
// that verifies every signature and refuses, with 400, one that fails.
func BenchmarkPublish(b *testing.B) {
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = verifier.Verify(body, r.Header)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	p := newPublisher(b, webhook.Config{URL: srv.URL})
	payload := []byte(`{"specversion":"1.0","id":"6f1c0f1e-8d2a-4b7e-9c1d-2f3a4b5c6d7e","source":"/accounts","type":"user.registered","datacontenttype":"application/json","time":"2031-03-04T05:06:07Z","data":{"user_id":"u_123","email":"someone@example.com"}}`)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := p.Publish("user.events", message.NewMessage(watermill.NewUUID(), payload)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// TestPublish holds deliveries to the Standard Webhooks contract and to
// the relay's deadlines.
func TestPublish(t *testing.T) {
	t.Parallel()
	t.Run("delivers signed messages in order", testPublishDeliversSignedMessagesInOrder)
	t.Run("a retry keeps the ID and stamps each attempt", testPublishRetryKeepsIDAndStampsEachAttempt)
	t.Run("stops at the first failure", testPublishStopsAtFirstFailure)
	t.Run("keeps no address of a refusal's answer", testPublishKeepsNoAddressOfARefusalsAnswer)
	t.Run("refuses a message without a UUID", testPublishRefusesMessageWithoutUUID)
	t.Run("does not follow redirects", testPublishDoesNotFollowRedirects)
	t.Run("gives up at the message deadline", testPublishGivesUpAtTheMessageDeadline)
	t.Run("stops when the message context is cancelled", testPublishStopsWhenTheMessageContextIsCancelled)
}

func testPublishDeliversSignedMessagesInOrder(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, receiverConfig{})
	clock := testclock.New(now())
	p := newPublisher(t, webhook.Config{URL: rcv.URL + "/hooks/accounts?v=1", Now: clock.Now})

	// Bytes that a careless sender would change: no final newline on one,
	// CRLF and a NUL and invalid UTF-8 on the other.
	first := message.NewMessage("evt-1", []byte(`{"specversion":"1.0","type":"user.registered","data":{"name":"Zoë"}}`))
	second := message.NewMessage("evt-2", []byte("line one\r\nline two\x00\xff\n"))
	second.Metadata.Set("content-type", "text/plain; charset=utf-8")
	if err := p.Publish("user.events", first, second); err != nil {
		t.Fatalf("Publish: %v", err)
	}

	for _, tc := range []struct {
		msg         *message.Message
		contentType string
	}{
		{first, "application/cloudevents+json"},
		{second, "text/plain; charset=utf-8"},
	} {
		d := rcv.next(t)
		if d.verifyErr != nil {
			t.Errorf("%s: the receiver's Verify: %v", tc.msg.UUID, d.verifyErr)
		}
		if d.method != http.MethodPost {
			t.Errorf("%s: method %s, want POST", tc.msg.UUID, d.method)
		}
		if !bytes.Equal(d.body, tc.msg.Payload) {
			t.Errorf("%s: body %q, want %q", tc.msg.UUID, d.body, tc.msg.Payload)
		}
		want := map[string]string{
			"Content-Type":      tc.contentType,
			"User-Agent":        "accounts-webhook",
			"Webhook-Id":        tc.msg.UUID,
			"Webhook-Timestamp": strconv.FormatInt(clock.Now().Unix(), 10),
		}
		for k, v := range want {
			if got := d.header.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", tc.msg.UUID, k, got, v)
			}
		}
		if got := d.header.Get("Webhook-Signature"); !strings.HasPrefix(got, "v1,") {
			t.Errorf("%s: webhook-signature %q is not a v1 signature", tc.msg.UUID, got)
		}
		for k := range d.header {
			if k := strings.ToLower(k); strings.HasPrefix(k, "webhook-") &&
				k != "webhook-id" && k != "webhook-timestamp" && k != "webhook-signature" {
				t.Errorf("%s: unexpected header %s", tc.msg.UUID, k)
			}
		}
	}
	rcv.none(t)
}

// A retry sends the same webhook-id, the receiver's idempotency key, with
// the timestamp of the retry, so that one long after the first try passes
// the receiver's check of the timestamp's age.
func testPublishRetryKeepsIDAndStampsEachAttempt(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, receiverConfig{answer: func(w http.ResponseWriter, n int) {
		if n < 2 {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write(bytes.Repeat([]byte("z"), 4096))
			return
		}
		w.WriteHeader(http.StatusOK)
	}})
	current := now()
	attempts := []time.Time{current.Add(-48 * time.Hour), current.Add(-24 * time.Hour), current}
	clock := testclock.New(attempts[0])
	p := newPublisher(t, webhook.Config{URL: rcv.URL, Now: clock.Now})
	msg := message.NewMessage("evt-retried", []byte(`{"n":1}`))

	for i, at := range attempts {
		clock.Set(at)
		err := p.Publish("user.events", msg)
		if i < 2 {
			if err == nil {
				t.Fatalf("attempt %d: Publish succeeded against a 500", i)
			}
			if !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), msg.UUID) {
				t.Errorf("attempt %d: error %q does not name the status and the message", i, err)
			}
			if n := strings.Count(err.Error(), "z"); n != 512 {
				t.Errorf("attempt %d: error repeats %d bytes of the answer, want 512", i, n)
			}
		} else if err != nil {
			t.Fatalf("attempt %d: Publish: %v", i, err)
		}

		d := rcv.next(t)
		if got := d.header.Get("webhook-id"); got != msg.UUID {
			t.Errorf("attempt %d: webhook-id %q, want %q", i, got, msg.UUID)
		}
		if got, want := d.header.Get("webhook-timestamp"), strconv.FormatInt(at.Unix(), 10); got != want {
			t.Errorf("attempt %d: webhook-timestamp %s, want this attempt's %s", i, got, want)
		}
		if d.signatureErr != nil {
			t.Errorf("attempt %d: signature: %v", i, d.signatureErr)
		}
		if i < 2 && !errors.Is(d.verifyErr, standardwebhooks.ErrMessageTooOld) {
			t.Errorf("attempt %d stamped %s: Verify = %v, want ErrMessageTooOld", i, at, d.verifyErr)
		}
		if i == 2 && d.verifyErr != nil {
			t.Errorf("attempt %d, the retry stamped now: Verify: %v", i, d.verifyErr)
		}
	}
	// Each failed answer's body was drained, so one connection served all.
	if n := rcv.conns.Load(); n != 1 {
		t.Errorf("%d connections for 3 requests, want 1", n)
	}
}

func testPublishStopsAtFirstFailure(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, receiverConfig{answer: func(w http.ResponseWriter, n int) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}})
	p := newPublisher(t, webhook.Config{URL: rcv.URL})
	err := p.Publish("t", message.NewMessage("a", []byte("1")), message.NewMessage("b", []byte("2")))
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Publish = %v, want an error naming 503", err)
	}
	if got := rcv.next(t).header.Get("webhook-id"); got != "a" {
		t.Errorf("first request is %q, want a", got)
	}
	rcv.none(t)
}

// An endpoint that refuses an event may quote it in its answer, which
// the error repeats: the addresses in it are redacted, the rest kept.
func testPublishKeepsNoAddressOfARefusalsAnswer(t *testing.T) {
	t.Parallel()
	// The second answer is cut, at 512 bytes, inside the address, after
	// "ann.ho", where no redaction knows it for one.
	head := `{"error":"unknown field","pad":"`
	tail := `","email":"`
	cut := head + strings.Repeat(" ", 512-len(head)-len(tail)-len("ann.ho")) + tail + `ann.hook@example.com"}`
	for _, answer := range []string{
		`{"error":"unknown field","event":{"data":{"email":"ann.hook@example.com"}}}`,
		cut,
	} {
		rcv := newReceiver(t, receiverConfig{answer: func(w http.ResponseWriter, n int) {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, answer)
		}})
		p := newPublisher(t, webhook.Config{URL: rcv.URL})
		err := p.Publish("t", message.NewMessage("a", []byte(`{"data":{"email":"ann.hook@example.com"}}`)))
		if err == nil {
			t.Fatal("Publish succeeded against a refusing endpoint")
		}
		rcv.next(t)
		if strings.Contains(err.Error(), "ann.ho") {
			t.Errorf("the error names the address: %v", err)
		}
		for _, want := range []string{"422", "unknown field"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error %q lacks %q", err, want)
			}
		}
	}
}

func testPublishRefusesMessageWithoutUUID(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, receiverConfig{})
	p := newPublisher(t, webhook.Config{URL: rcv.URL})
	if err := p.Publish("t", message.NewMessage("", []byte("{}"))); err == nil {
		t.Fatal("Publish sent a message with no UUID")
	}
	rcv.none(t)
}

// A redirect is a failure and is not followed, with the publisher's own
// client or with one it was given that would follow it.
func testPublishDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		for _, client := range []*http.Client{nil, {}} {
			name := strconv.Itoa(code) + "/own client"
			if client != nil {
				name = strconv.Itoa(code) + "/given client"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				elsewhere := newReceiver(t, receiverConfig{})
				rcv := newReceiver(t, receiverConfig{answer: func(w http.ResponseWriter, _ int) {
					w.Header().Set("Location", elsewhere.URL)
					w.WriteHeader(code)
				}})
				p := newPublisher(t, webhook.Config{URL: rcv.URL, Client: client})
				err := p.Publish("t", message.NewMessage("evt-1", []byte("{}")))
				if err == nil || !strings.Contains(err.Error(), strconv.Itoa(code)) {
					t.Errorf("Publish = %v, want an error naming %d", err, code)
				}
				rcv.next(t)
				elsewhere.none(t)
			})
		}
	}
}

func testPublishGivesUpAtTheMessageDeadline(t *testing.T) {
	t.Parallel()
	srv, _ := hangingReceiver(t)
	// A password in the URL must not show in a transport error either.
	u := strings.Replace(srv.URL, "http://", "http://user:s3cret@", 1)
	p := newPublisher(t, webhook.Config{URL: u})
	const wait = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	msg := message.NewMessage("evt-1", []byte("{}"))
	msg.SetContext(ctx)

	start := time.Now()
	err := p.Publish("t", msg)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish = %v, want context.DeadlineExceeded", err)
	}
	if took > wait+time.Second {
		t.Errorf("Publish returned %s after a %s deadline", took, wait)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
}

func testPublishStopsWhenTheMessageContextIsCancelled(t *testing.T) {
	t.Parallel()
	srv, started := hangingReceiver(t)
	p := newPublisher(t, webhook.Config{URL: srv.URL})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	msg := message.NewMessage("evt-1", []byte("{}"))
	msg.SetContext(ctx)
	go func() {
		<-started
		cancel()
	}()
	if err := p.Publish("t", msg); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish = %v, want context.Canceled", err)
	}
}

// TestNew refuses a configuration that cannot work, without showing its
// secrets.
func TestNew(t *testing.T) {
	t.Parallel()
	t.Run("validates the configuration", testNewValidatesConfig)
	t.Run("errors do not show the password", testNewErrorsDoNotShowThePassword)
}

func testNewValidatesConfig(t *testing.T) {
	t.Parallel()
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, n)) }
	good := "https://hooks.example.com/accounts"
	for _, tc := range []struct {
		name, url, secret string
		want              error
	}{
		{"bad scheme", "ftp://hooks.example.com/", secret, webhook.ErrBadURL},
		{"no host", "https:///accounts", secret, webhook.ErrBadURL},
		{"opaque", "https:hooks.example.com", secret, webhook.ErrBadURL},
		{"relative", "/accounts", secret, webhook.ErrBadURL},
		{"host without scheme", "hooks.example.com/accounts", secret, webhook.ErrBadURL},
		{"empty", "", secret, webhook.ErrBadURL},
		{"port 0", "https://hooks.example.com:0/", secret, webhook.ErrBadURL},
		{"port too big", "https://hooks.example.com:70000/", secret, webhook.ErrBadURL},
		{"no prefix", good, b64(32), webhook.ErrBadSecret},
		{"empty secret", good, "", webhook.ErrBadSecret},
		{"bad base64", good, "whsec_not*base64!", webhook.ErrBadSecret},
		{"url-safe base64", good, "whsec_" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32)), webhook.ErrBadSecret},
		{"unpadded", good, "whsec_" + base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)), webhook.ErrBadSecret},
		{"line break", good, "whsec_" + b64(30)[:20] + "\n" + b64(30)[20:], webhook.ErrBadSecret},
		{"nothing after prefix", good, "whsec_", webhook.ErrBadSecret},
		{"too short", good, "whsec_" + b64(23), webhook.ErrBadSecret},
		{"too long", good, "whsec_" + b64(65), webhook.ErrBadSecret},
	} {
		_, err := webhook.New(webhook.Config{URL: tc.url, Secret: tc.secret})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: New = %v, want %v", tc.name, err, tc.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "webhook: ") {
			t.Errorf("%s: error %q does not start with webhook:", tc.name, err)
		}
	}
	for _, s := range []string{"whsec_" + b64(24), secret, "whsec_" + b64(64)} {
		if _, err := webhook.New(webhook.Config{URL: good, Secret: s}); err != nil {
			t.Errorf("New refused a %d-character secret: %v", len(s), err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:1/unreachable", "https://user:pass@hooks.example.com:8443/a?b=c"} {
		if _, err := webhook.New(webhook.Config{URL: u, Secret: secret}); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
}

func testNewErrorsDoNotShowThePassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"ftp://user:s3cret@hooks.example.com/",
		"https://user:s3cret@/accounts",
		"https://user:s3cret@hooks.example.com:x/",
		"https://user:s3cret@hooks.example.com:0/",
		"https://user:s3cret%zz@hooks.example.com/",
		"https://user:%zzs3cret@hooks.example.com/",
		"https://user:s3cret@hooks example.com/",
		"https://user:s3cret\x7f@hooks.example.com/",
	} {
		_, err := webhook.New(webhook.Config{URL: u, Secret: secret})
		if !errors.Is(err, webhook.ErrBadURL) {
			t.Errorf("New(%q) = %v, want ErrBadURL", u, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "zz") {
			t.Errorf("New(%q): the error shows the password: %v", u, err)
		}
	}
	if _, err := webhook.New(webhook.Config{URL: "https://hooks.example.com/", Secret: "whsec_s3cret"}); strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the secret: %v", err)
	}
}
