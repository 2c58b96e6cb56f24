package main

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// TestSMTPOutageOfTenMinutesLosesNoMail keeps the SMTP server down for ten
// minutes of the relay's clock, with the seed's defaults (MaxAttempts 8,
// backoff from one second), while people keep asking for sign-in links.
// Without a breaker every mail asked for in the first two minutes or so was
// buried before the server came back. With it, the topic's breaker opens, the
// relay stops spending attempts and probes now and then; once the server is
// back, every mail is sent and none is buried.
func TestSMTPOutageOfTenMinutesLosesNoMail(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	o := newMailOutage(t)
	mx, clock, reader, users, total, drain := o.mx, o.clock, o.reader, o.users, &o.total, o.drain

	mx.Stop()
	const outage, every = 10 * time.Minute, 15 * time.Second
	asked := 0
	for elapsed := time.Duration(0); elapsed < outage; elapsed += time.Second {
		if elapsed%every == 0 {
			if err := users.RequestSignInLink(ctx, fmt.Sprintf("person%d@example.com", asked)); err != nil {
				t.Fatal(err)
			}
			asked++
		}
		drain()
		clock.Advance(time.Second)
	}
	if total.Delivered != 0 || total.Buried != 0 {
		t.Fatalf("during the outage: %+v, want nothing delivered or buried", total)
	}
	// Three failures open the breaker; then one probe per opening, at most
	// one a minute once it has grown.
	if total.Retried > 20 {
		t.Errorf("%d attempts spent during the outage; want only the first failures and the probes", total.Retried)
	}
	if got := breakerState(t, reader, mail.TopicLoginLink); got != 2 {
		t.Errorf("breaker state during the outage = %d, want 2 (open)", got)
	}

	mx.Start(t)
	for waited := time.Duration(0); total.Delivered < asked && waited < 2*time.Minute; waited += time.Second {
		drain()
		clock.Advance(time.Second)
	}
	if total.Delivered != asked || total.Buried != 0 {
		t.Fatalf("after the server came back: %+v; want all %d mails delivered and none buried", total, asked)
	}
	if got := len(mx.Messages()); got != asked {
		t.Errorf("the server received %d mails, want %d", got, asked)
	}
	if got := breakerState(t, reader, mail.TopicLoginLink); got != 0 {
		t.Errorf("breaker state once mail flows again = %d, want 0 (closed)", got)
	}
}

// TestSMTPOutageWithOneMailLosesNoMail keeps the SMTP server down, refusing
// connections, for two and a half minutes of the relay's clock while one
// mail alone waits, with the seed's defaults. The refused connection opens
// the topic's breaker at the first failure, although no other message is
// failing: the mail is tried at the probes' pace and sent once the server is
// back. Without that, its backoff spent its eight attempts within the
// outage and buried it.
func TestSMTPOutageWithOneMailLosesNoMail(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	o := newMailOutage(t)
	mx, clock, reader, users, total, drain := o.mx, o.clock, o.reader, o.users, &o.total, o.drain
	mx.Stop()
	if err := users.RequestSignInLink(ctx, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	drain()
	if got := breakerState(t, reader, mail.TopicLoginLink); got != 2 {
		t.Errorf("breaker state after one refused connection = %d, want 2 (open)", got)
	}
	for elapsed := time.Second; elapsed < 150*time.Second; elapsed += time.Second {
		clock.Advance(time.Second)
		drain()
	}
	mx.Start(t)
	for waited := time.Duration(0); total.Delivered == 0 && total.Buried == 0 && waited < 2*time.Minute; waited += time.Second {
		clock.Advance(time.Second)
		drain()
	}
	if total.Delivered != 1 || total.Buried != 0 {
		t.Fatalf("after the server came back: %+v; want the mail delivered, not buried", total)
	}
	if got := len(mx.Messages()); got != 1 {
		t.Errorf("the server received %d mails, want 1", got)
	}
}

// mailOutage is a user service and a mail relay on a database of their own,
// on one clock, with an SMTP server to stop and start, the relay's
// metrics, and drain, which runs one pass of the relay and adds what it
// did to total.
type mailOutage struct {
	mx     *smtptest.Server
	clock  *testclock.Clock
	reader *sdkmetric.ManualReader
	users  *user.Service
	total  relay.DrainStats
	drain  func()
}

func newMailOutage(t *testing.T) *mailOutage {
	t.Helper()
	db := pgtest.New(t)
	o := &mailOutage{
		mx:     smtptest.NewServer(t),
		clock:  testclock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
		reader: sdkmetric.NewManualReader(),
	}
	relay := e2eMailRelay(t, db.Outbox(), o.mx, o.clock, outbox.RelayConfig{},
		relay.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))))
	users, err := user.NewService(user.Deps{
		Runner: db.Runner(o.clock.Now),
		Events: db.Events(),
		Outbox: db.Outbox(),
		Views:  postgres.UserViews{},
		Keys:   keyringtest.New(t, postgres.DataKeys{}),
	}, user.Policy{}, "http://accounts.test")
	if err != nil {
		t.Fatal(err)
	}
	o.users = users
	o.drain = func() {
		t.Helper()
		got, err := relay.Drain(t.Context())
		if err != nil {
			t.Fatalf("drain at %s: %v", o.clock.Now().Format(time.RFC3339), err)
		}
		o.total.Claimed += got.Claimed
		o.total.Delivered += got.Delivered
		o.total.Retried += got.Retried
		o.total.Buried += got.Buried
	}
	return o
}

// breakerState returns the value of the outbox.breaker.state gauge for topic.
func breakerState(t *testing.T, reader *sdkmetric.ManualReader, topic string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[int64])
			if m.Name != "outbox.breaker.state" || !ok {
				continue
			}
			for _, p := range g.DataPoints {
				if v, _ := p.Attributes.Value(attribute.Key("topic")); v.AsString() == topic {
					return p.Value
				}
			}
		}
	}
	t.Fatalf("no outbox.breaker.state for topic %q", topic)
	return -1
}
