package user_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// One account may ask for as many email changes as an address may ask for
// sign-in links, so that it can neither flood an inbox nor probe which
// addresses have accounts faster than that.
func TestEmailChangeRequestsAreLimitedPerUser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.signIn(t, "ada@example.com")
	for i := range 5 {
		if err := b.svc.RequestEmailChange(t.Context(), s.Token, fmt.Sprintf("new%d@example.com", i)); err != nil {
			t.Fatalf("change request %d: %v", i+1, err)
		}
		b.clock.Advance(time.Minute)
	}
	b.mails(t)
	events := b.events(t)
	err := b.svc.RequestEmailChange(t.Context(), s.Token, "victim@example.com")
	var tooMany *user.TooManyRequestsError
	if !errors.As(err, &tooMany) || !errors.Is(err, user.ErrTooManyRequests) {
		t.Fatalf("sixth change request: %v, want a *TooManyRequestsError", err)
	}
	if want := 10 * time.Minute; tooMany.RetryAfter != want {
		t.Errorf("RetryAfter %s, want %s: until the first request leaves the window", tooMany.RetryAfter, want)
	}
	b.unchanged(t, "a refused change request", events)
	if ms := b.mails(t); len(ms) != 0 {
		t.Errorf("a refused change request mailed %v", ms)
	}
	// A taken address is refused as too many too, so the limit holds
	// against probing for accounts.
	b.signIn(t, "grace@example.com")
	if err := b.svc.RequestEmailChange(t.Context(), s.Token, "grace@example.com"); !errors.Is(err, user.ErrTooManyRequests) {
		t.Errorf("probing a taken address over the limit: %v, want ErrTooManyRequests", err)
	}
	b.clock.Advance(tooMany.RetryAfter)
	if err := b.svc.RequestEmailChange(t.Context(), s.Token, "victim@example.com"); err != nil {
		t.Errorf("once the window moved on: %v", err)
	}
}

// tailSpy is an event store that counts the events its loads return, and
// its calls of LoadSince.
type tailSpy struct {
	*postgres.EventStore
	loaded     atomic.Int64
	loadsSince atomic.Int64
}

func (s *tailSpy) Load(ctx context.Context, tx uow.Tx, stream string, from int64) ([]eventstore.Event, error) {
	events, err := s.EventStore.Load(ctx, tx, stream, from)
	s.loaded.Add(int64(len(events)))
	return events, err
}

func (s *tailSpy) LoadSince(ctx context.Context, tx uow.Tx, stream string, since time.Time) ([]eventstore.Event, int64, error) {
	events, version, err := s.EventStore.LoadSince(ctx, tx, stream, since)
	s.loadsSince.Add(1)
	s.loaded.Add(int64(len(events)))
	return events, version, err
}

// spied returns a service on b's database whose event store counts the
// events its loads return.
func spied(t *testing.T, b *bundle) (*user.Service, *tailSpy) {
	t.Helper()
	spy := &tailSpy{EventStore: b.db.Events().(*postgres.EventStore)}
	svc, err := user.NewService(user.Deps{
		Runner: b.db.Runner(b.clock.Now), Events: spy, Outbox: b.db.Outbox(), Views: postgres.UserViews{}, Keys: b.keys,
	}, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	return svc, spy
}

// An address's old links cost nothing: a request that loads the address's
// links reads only those that can still count, however long its history.
func TestSignInLinkRequestsReadOnlyRecentHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc, spy := spied(t, b)
	for range 4 {
		for range 5 {
			if err := svc.RequestSignInLink(t.Context(), "ada@example.com"); err != nil {
				t.Fatal(err)
			}
		}
		b.clock.Advance(time.Hour)
	}
	// Five requests in the window presume the address below its limit and
	// load nothing; the sixth loads, and reads the five recent links.
	for range 5 {
		if err := svc.RequestSignInLink(t.Context(), "ada@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	b.mails(t)
	spy.loaded.Store(0)
	spy.loadsSince.Store(0)
	if err := svc.RequestSignInLink(t.Context(), "ada@example.com"); !errors.Is(err, user.ErrTooManyRequests) {
		t.Fatalf("a sixth request in the window: %v, want ErrTooManyRequests", err)
	}
	if n, loads := spy.loaded.Load(), spy.loadsSince.Load(); n != 5 || loads != 1 {
		t.Errorf("a request after 20 old links and five recent loaded %d times and read %d events, want once and 5", loads, n)
	}
}

// A request for a link presumes the address below its limit and loads
// nothing, however many links it asked for in the window, so that its
// time tells nothing; only a request at the limit loads the address's
// links, and counts them.
func TestSignInLinkRequestsLoadOnlyAtTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc, spy := spied(t, b)
	const address = "ada@example.com"
	request := func(what string, loads int64) error {
		t.Helper()
		spy.loadsSince.Store(0)
		err := svc.RequestSignInLink(t.Context(), address)
		if n := spy.loadsSince.Load(); n != loads {
			t.Errorf("%s loaded the address's links %d times, want %d", what, n, loads)
		}
		return err
	}
	for i := range 5 {
		if err := request(fmt.Sprintf("request %d", i+1), 0); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		b.clock.Advance(time.Minute)
	}
	if sent := b.mails(t); len(sent) != 5 {
		t.Fatalf("five requests mailed %d links, want 5", len(sent))
	}
	events := b.events(t)
	if err := request("the sixth request", 1); !errors.Is(err, user.ErrTooManyRequests) {
		t.Fatalf("the sixth request: %v, want ErrTooManyRequests", err)
	}
	b.unchanged(t, "the sixth request", events)
	// Once the links no longer count nor work, the address is far below
	// its limit again.
	b.clock.Advance(15 * time.Minute)
	if err := request("a request after the window", 0); err != nil {
		t.Fatal(err)
	}
	if sent := b.mails(t); len(sent) != 1 {
		t.Errorf("the request after the window mailed %d links, want 1", len(sent))
	}
}

// An account's old history costs nothing: after many sign-ins and changes
// long ago, Me reads no event and each command only the account's events
// within the link window, however long its history.
func TestAccountCommandsReadOnlyRecentHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc, spy := spied(t, b)
	var s user.Session
	for i := range 12 {
		s = b.signIn(t, "ada@example.com")
		if i%3 == 0 {
			b.changeCode(t, s.Token, "ada.maybe@example.com")
		}
		b.clock.Advance(time.Hour)
	}
	for _, c := range []struct {
		name string
		run  func() error
		want int64
	}{
		{"Me", func() error { _, err := svc.Me(t.Context(), s.Token); return err }, 0},
		// The account's stream holds nothing of the last window yet.
		{"RequestEmailChange", func() error { return svc.RequestEmailChange(t.Context(), s.Token, "ada.new@example.com") }, 0},
		// Its own request, now in the window.
		{"ConfirmEmailChange", func() error {
			_, err := svc.ConfirmEmailChange(t.Context(), b.oneMail(t, mail.TopicEmailChange, "ada.new@example.com", "/confirm-email").Link.Code, s.Token)
			return err
		}, 1},
		// The request, the change, and the ends of the 11 other sessions
		// that the change brought about.
		{"SignOut", func() error { return svc.SignOut(t.Context(), s.Token) }, 13},
	} {
		spy.loaded.Store(0)
		if err := c.run(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n := spy.loaded.Load(); n != c.want {
			t.Errorf("%s after 12 hours of history read %d events, want %d", c.name, n, c.want)
		}
	}
}

// A change can be confirmed until its link expires, though that is later
// than the limit's window, and a request counts against the limit for the
// whole window, though its link expired before: the tail read covers both.
func TestAccountTailCoversTheLongerOfWindowAndTTL(t *testing.T) {
	t.Parallel()
	// ask asks for a change and returns the code its mail carries.
	ask := func(t *testing.T, b *bundle, token, address string) string {
		t.Helper()
		if err := b.svc.RequestEmailChange(t.Context(), token, address); err != nil {
			t.Fatal(err)
		}
		ms := b.mails(t)
		if len(ms) != 1 {
			t.Fatalf("%d mails, want 1", len(ms))
		}
		return ms[0].Link.Code
	}
	signIn := func(t *testing.T, b *bundle) user.Session {
		t.Helper()
		if err := b.svc.RequestSignInLink(t.Context(), "ada@example.com"); err != nil {
			t.Fatal(err)
		}
		ms := b.mails(t)
		if len(ms) != 1 {
			t.Fatalf("%d mails, want 1", len(ms))
		}
		s, err := b.svc.SignIn(t.Context(), ms[0].Link.Code)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("LinkTTL longer", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, user.Policy{LinkTTL: time.Hour, LinkWindow: 10 * time.Minute})
		s := signIn(t, b)
		code := ask(t, b, s.Token, "ada.new@example.com")
		b.clock.Advance(50 * time.Minute)
		if _, err := b.svc.ConfirmEmailChange(t.Context(), code, s.Token); err != nil {
			t.Errorf("a confirmation within LINK_TTL, past LINK_WINDOW: %v", err)
		}
	})
	t.Run("LinkWindow longer", func(t *testing.T) {
		t.Parallel()
		b := setupPolicy(t, user.Policy{LinkTTL: 5 * time.Minute, LinkWindow: time.Hour, LinkLimit: 2})
		s := signIn(t, b)
		ask(t, b, s.Token, "one@example.com")
		ask(t, b, s.Token, "two@example.com")
		b.clock.Advance(50 * time.Minute)
		var tooMany *user.TooManyRequestsError
		if err := b.svc.RequestEmailChange(t.Context(), s.Token, "three@example.com"); !errors.As(err, &tooMany) {
			t.Errorf("a third request within LINK_WINDOW, past LINK_TTL: %v, want TooManyRequestsError", err)
		}
	})
}
