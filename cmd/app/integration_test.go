package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/org"
	orgintegration "github.com/eventsourced/accounts/internal/org/integration"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/publish/natsbroker"
	"github.com/eventsourced/accounts/internal/publish/natsbroker/natstest"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/integration"
	"github.com/eventsourced/accounts/internal/user/mail"
	"github.com/eventsourced/accounts/schemas"
)

// TestIntegrationEvents runs the app against each kind of destination of
// integration events: each gets a user's events once, in order, through
// outages of the destination.
func TestIntegrationEvents(t *testing.T) {
	t.Parallel()
	t.Run("JetStream", testSignInIsPublishedToJetStream)
	t.Run("JetStreamOutageLosesNothingAndRepeatsNothing", testJetStreamOutageLosesNothingAndRepeatsNothing)
	t.Run("KafkaKeepsEachUsersEventsInOnePartitionInOrder", testKafkaKeepsEachUsersEventsInOnePartitionInOrder)
	t.Run("WebhookIsRetriedUntilItAnswers2xx", testWebhookIsRetriedUntilItAnswers2xx)
	t.Run("EventsAddedBeforeTheRenameAreDeliveredAsStored", testEventsAddedBeforeTheRenameAreDeliveredAsStored)
}

// streamEvents reads the whole stream ACCOUNTS, waiting until it holds at
// least n messages, and checks each against its event's schema and
// Nats-Msg-Id.
func streamEvents(t *testing.T, js jetstream.JetStream, n int) []publish.CloudEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), e2eWait)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "ACCOUNTS", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []publish.CloudEvent
	for len(out) < n {
		batch, err := cons.Fetch(n-len(out), jetstream.FetchMaxWait(e2eWait))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			var e publish.CloudEvent
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				t.Fatalf("%s: %v", m.Subject(), err)
			}
			if err := schemas.Check(m.Data()); err != nil {
				t.Errorf("%s does not match its schema: %v\n%s", m.Subject(), err, m.Data())
			}
			if got := m.Headers().Get("Nats-Msg-Id"); got != e.ID {
				t.Errorf("%s: Nats-Msg-Id %q, want the event's id %s", m.Subject(), got, e.ID)
			}
			if got := m.Headers().Get("content-type"); got != publish.ContentType {
				t.Errorf("%s: content-type %q", m.Subject(), got)
			}
			if m.Subject() != "accounts."+integration.Route(e.Type) {
				t.Errorf("event %s of type %s on subject %s", e.ID, e.Type, m.Subject())
			}
			out = append(out, e)
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
		if len(out) < n && ctx.Err() != nil {
			t.Fatalf("the stream holds %d events, want %d", len(out), n)
		}
	}
	info, err := js.Stream(t.Context(), "ACCOUNTS")
	if err != nil {
		t.Fatal(err)
	}
	if got := info.CachedInfo().State.Msgs; got != uint64(n) {
		t.Errorf("the stream holds %d messages, want %d", got, n)
	}
	return out
}

// testSignInIsPublishedToJetStream runs the app with BROKER_URL pointing at
// a NATS server whose operator made the stream with the server's default
// duplicate window: the app widens it, a first sign-in puts
// user.registered then user.signed_in on the stream, and the creation of
// an organization puts its creator's org.member_added there, about the
// organization.
func testSignInIsPublishedToJetStream(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "ACCOUNTS", Subjects: []string{"accounts.>"}}); err != nil {
		t.Fatal(err)
	}
	mx := smtptest.NewServer(t)
	app := e2eStart(t, map[string]string{
		"DATABASE_URL":    pgtest.NewURL(t),
		"DATA_KEY":        testDataKey,
		"HTTP_ADDR":       "127.0.0.1:0",
		"SMTP_URL":        mx.URL(),
		"BASE_URL":        "http://accounts.test",
		"BROKER_URL":      srv.URL,
		"OUTBOX_INTERVAL": "1h",
	})
	app.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"ada@example.com"}`, http.StatusAccepted, nil)
	code := e2eLinkCode(t, mx.Wait(t, 1, e2eWait)[0], "http://accounts.test/sign-in?code=")
	var session struct {
		Token string                 `json:"token"`
		User  struct{ ID uuid.UUID } `json:"user"`
	}
	app.expect(t, "POST", "/v1/sessions", "", e2eJSON(t, map[string]string{"code": code}), http.StatusCreated, &session)
	var o struct{ ID uuid.UUID }
	app.expect(t, "POST", "/v1/orgs", session.Token, `{"name":"Analytical Engines"}`, http.StatusCreated, &o)

	// The user's events come in their order; the organization's have no
	// order with them.
	events := streamEvents(t, js, 3)
	bySubject := map[string][]publish.CloudEvent{}
	for _, e := range events {
		if e.Source != "http://accounts.test" {
			t.Errorf("event %s from %s", e.Type, e.Source)
		}
		bySubject[e.Subject] = append(bySubject[e.Subject], e)
	}
	for subject, types := range map[uuid.UUID][]string{
		session.User.ID: {integration.TypeRegistered, integration.TypeSignedIn},
		o.ID:            {orgintegration.TypeMemberAdded},
	} {
		var got []string
		for _, e := range bySubject[subject.String()] {
			got = append(got, e.Type)
		}
		if !slices.Equal(got, types) {
			t.Errorf("events about %s: %v, want %v", subject, got, types)
		}
	}
	if len(bySubject[o.ID.String()]) != 1 {
		t.FailNow()
	}
	var added orgintegration.MemberAdded
	if err := json.Unmarshal(bySubject[o.ID.String()][0].Data, &added); err != nil {
		t.Fatal(err)
	}
	if want := (orgintegration.MemberAdded{OrganizationID: o.ID, UserID: session.User.ID, Role: orgintegration.RoleOwner, Version: 2}); added != want {
		t.Errorf("org.member_added with %+v, want %+v", added, want)
	}
	s, err := js.Stream(t.Context(), "ACCOUNTS")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Duplicates; got < 5*time.Minute {
		t.Errorf("duplicate window %s, shorter than the relay's longest wait between tries", got)
	}
	app.stop(t)
}

// lossyAcks is an outbox whose acknowledgements fail while drop is above
// zero, as when the relay dies between a publish and its acknowledgement.
type lossyAcks struct {
	outbox.RelayStore
	drop atomic.Int32
}

func (s *lossyAcks) Ack(ctx context.Context, id uuid.UUID) error {
	if s.drop.Add(-1) >= 0 {
		return errors.New("connection reset by peer")
	}
	return s.RelayStore.Ack(ctx, id)
}

func (s *lossyAcks) AckAll(ctx context.Context, leases []outbox.Lease) error {
	if s.drop.Add(-1) >= 0 {
		return errors.New("connection reset by peer")
	}
	return s.RelayStore.AckAll(ctx, leases)
}

// integrationBench is a user service, an organizations service and a
// relay driven by hand on a clock of its own, publishing to the
// destinations that env configures.
type integrationBench struct {
	users *user.Service
	orgs  *org.Service
	relay *relay.Relay
	store *lossyAcks
	clock *testclock.Clock
	pubs  *publishers

	// db is the database of the service and the relay.
	db *postgres.DB
}

func newIntegrationBench(t *testing.T, vars map[string]string) *integrationBench {
	t.Helper()
	cfg, err := config.Load(getenv(vars))
	if err != nil {
		t.Fatal(err)
	}
	e := env{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	db := pgtest.New(t)
	b := &integrationBench{store: &lossyAcks{RelayStore: db.Outbox()}, clock: testclock.New(time.Now().UTC().Truncate(time.Second))}
	b.db = db
	keys := keyringtest.New(t, postgres.DataKeys{})
	b.users, err = user.NewService(user.Deps{
		Runner: db.Runner(b.clock.Now),
		Events: db.Events(),
		Outbox: db.Outbox(),
		Views:  postgres.UserViews{},
		Keys:   keys,
	}, user.Policy{}, cfg.BaseURL, user.WithIntegrationEvents(e.integrationEvents()),
		user.WithErasure(func(ctx context.Context, tx uow.Tx, u user.User) error { return b.orgs.Erased(ctx, tx, u) }))
	if err != nil {
		t.Fatal(err)
	}
	b.orgs, err = org.NewService(org.Deps{
		Runner:    db.Runner(b.clock.Now),
		Events:    db.Events(),
		Outbox:    db.Outbox(),
		Views:     db.OrgViews(),
		Users:     b.users,
		UserViews: db.Views(),
		Keys:      keys,
	}, org.Policy{}, cfg.BaseURL, org.WithIntegrationEvents(e.integrationEvents()))
	if err != nil {
		t.Fatal(err)
	}
	pubs, err := e.publishers()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pubs.Close() })
	b.pubs = pubs
	// A publish cut short by the timeout may still reach the broker, and
	// its retry publishes the event again, as at-least-once allows; the
	// tests that count records want none of that on a busy machine, so
	// the timeout is far above a publish's time and only ends the tries
	// against a destination that is down.
	b.relay, err = relay.New(b.store, pubs.handlers, outbox.RelayConfig{Timeout: 2 * time.Second},
		relay.WithClock(b.clock.Now), e.publishPolicy(pubs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.relay.Close() })
	return b
}

// signIn signs a new address in, straight through the service, taking the
// code from the outbox.
func (b *integrationBench) signIn(t *testing.T, email string) user.Session {
	t.Helper()
	if err := b.users.RequestSignInLink(t.Context(), email); err != nil {
		t.Fatal(err)
	}
	s, err := b.users.SignIn(t.Context(), b.code(t, mail.TopicLoginLink))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// code takes the one mail of topic from the outbox, as if delivered, and
// returns its code.
func (b *integrationBench) code(t *testing.T, topic string) string {
	t.Helper()
	ctx := outbox.WithScope(t.Context(), outbox.Scope{Only: []string{topic}})
	msgs, err := b.store.RelayStore.Claim(ctx, b.clock.Now(), time.Minute, 1)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("claim the mail of %s: %v, %v", topic, msgs, err)
	}
	var link struct{ Code string }
	if err := json.Unmarshal(msgs[0].Payload, &link); err != nil {
		t.Fatal(err)
	}
	if err := b.store.RelayStore.Ack(t.Context(), msgs[0].ID); err != nil {
		t.Fatal(err)
	}
	return link.Code
}

// join invites the address of s into the organization id on behalf of
// the owner, and accepts the invitation with s.
func (b *integrationBench) join(t *testing.T, owner string, id uuid.UUID, s user.Session, role org.Role) {
	t.Helper()
	if err := b.orgs.Invite(t.Context(), owner, id, s.User.Email, role); err != nil {
		t.Fatal(err)
	}
	if _, err := b.orgs.Accept(t.Context(), s.Token, b.code(t, mail.TopicOrgInvitation)); err != nil {
		t.Fatal(err)
	}
}

// awaitConnected waits until every NATS publisher is connected again.
func (b *integrationBench) awaitConnected(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for _, pub := range b.pubs.pubs {
		nats, ok := pub.(*natsbroker.Publisher)
		for ok && !nats.Connected() {
			if time.Now().After(deadline) {
				t.Fatalf("the NATS publisher did not reconnect within %s", e2eWait)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// drainUntilDelivered drains, moving the clock a minute each pass, until a
// pass delivers want messages in all, within e2eWait of real time, which
// only bounds a client's reconnection.
func (b *integrationBench) drainUntilDelivered(t *testing.T, want int) relay.DrainStats {
	t.Helper()
	var total relay.DrainStats
	deadline := time.Now().Add(e2eWait)
	for total.Delivered < want {
		got, err := b.relay.Drain(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		total.Claimed += got.Claimed
		total.Delivered += got.Delivered
		total.Retried += got.Retried
		total.Buried += got.Buried
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d of %d within %s: %+v", total.Delivered, want, e2eWait, total)
		}
		b.clock.Advance(time.Minute)
	}
	return total
}

// testJetStreamOutageLosesNothingAndRepeatsNothing stops the NATS server
// while commands run and starts it again: every event arrives, in the order
// of each user's versions, and none twice, though the relay publishes one
// twice: the acknowledgement of a publish is lost, so its message is
// published again once its lease ends (holding the user's next event back
// until then), and JetStream drops the repeat by its Nats-Msg-Id.
func testJetStreamOutageLosesNothingAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := newIntegrationBench(t, map[string]string{"BROKER_URL": srv.URL, "BASE_URL": "http://accounts.test"})

	ada := b.signIn(t, "ada@example.com")
	// user.registered is published and its acknowledgement lost, which
	// holds Ada's user.signed_in back until its lease ends.
	b.store.drop.Store(1)
	if stats, err := b.relay.Drain(t.Context()); err != nil || stats.Delivered != 1 {
		t.Fatalf("first drain: %+v, %v; want user.registered published", stats, err)
	}
	if stats, err := b.relay.Drain(t.Context()); err != nil || stats.Claimed != 0 {
		t.Fatalf("drain within the lease: %+v, %v; want nothing claimed", stats, err)
	}

	srv.Stop()
	grace := b.signIn(t, "grace@example.com")
	b.signIn(t, "ada@example.com")
	if stats, err := b.relay.Drain(t.Context()); err != nil || stats.Delivered != 0 || stats.Retried == 0 {
		t.Fatalf("drain with the server down: %+v, %v; want retries", stats, err)
	}
	b.clock.Advance(time.Hour)
	srv.Start()
	// The client reconnects on its own within seconds of real time; the
	// passes below move the clock a minute each and would spend every try
	// the events have before then.
	b.awaitConnected(t)
	// Ada's user.registered again, then her first user.signed_in, Grace's
	// two and Ada's second sign-in.
	if got := b.drainUntilDelivered(t, 5); got.Delivered != 5 {
		t.Errorf("after the outage: %+v, want 5 published", got)
	}

	events := streamEvents(t, srv.JetStream(t), 5)
	seen := map[string]bool{}
	last := map[string]float64{}
	for _, e := range events {
		if seen[e.ID] {
			t.Errorf("event %s is in the stream twice", e.ID)
		}
		seen[e.ID] = true
		var data struct{ Version float64 }
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Fatal(err)
		}
		if data.Version <= last[e.Subject] {
			t.Errorf("%s of %s at version %v after version %v: out of order", e.Type, e.Subject, data.Version, last[e.Subject])
		}
		last[e.Subject] = data.Version
	}
	if last[ada.User.ID.String()] != 3 || last[grace.User.ID.String()] != 2 {
		t.Errorf("last versions %v, want Ada's 3 and Grace's 2", last)
	}
	if n, err := b.store.RelayStore.(interface {
		Buried(context.Context, int) ([]outbox.Record, error)
	}).Buried(t.Context(), 10); err != nil || len(n) != 0 {
		t.Errorf("buried %v, %v; want nothing buried", n, err)
	}
}
