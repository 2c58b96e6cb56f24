package user_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// interruptingViews are PostgreSQL's user views that, the first time a
// command has read a user, let another command commit: on PostgreSQL
// each statement of a unit of work sees what committed before it, so a
// command's reads must not mix states from either side of such a commit.
type interruptingViews struct {
	postgres.UserViews
	once      sync.Once
	interrupt func()
}

func (v *interruptingViews) User(ctx context.Context, tx uow.Tx, id uuid.UUID) (user.User, bool, error) {
	u, ok, err := v.UserViews.User(ctx, tx, id)
	v.once.Do(v.interrupt)
	return u, ok, err
}

// interrupted returns a service on b's database whose first read of a
// user lets interrupt run, with b's own service, before it goes on.
func interrupted(t *testing.T, b *bundle, interrupt func()) *user.Service {
	t.Helper()
	svc, err := user.NewService(user.Deps{
		Runner: b.db.Runner(b.clock.Now), Events: b.db.Events(), Outbox: b.db.Outbox(),
		Views: &interruptingViews{UserViews: postgres.UserViews{}, interrupt: interrupt}, Keys: b.keys,
	}, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// A sign-out that commits while a command on the same session is under
// way wins: the command is refused, whichever it is.
func TestSignOutWinsOverACommandUnderWay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	for _, c := range []struct {
		name string
		run  func(svc *user.Service, token string) error
	}{
		{"RequestEmailChange", func(svc *user.Service, token string) error {
			return svc.RequestEmailChange(ctx, token, "new@example.com")
		}},
		{"SignOut", func(svc *user.Service, token string) error { return svc.SignOut(ctx, token) }},
	} {
		s := b.signIn(t, "ada@example.com")
		events := b.events(t)
		svc := interrupted(t, b, func() {
			if err := b.svc.SignOut(ctx, s.Token); err != nil {
				t.Errorf("the interrupting sign-out: %v", err)
			}
		})
		if err := c.run(svc, s.Token); !errors.Is(err, user.ErrUnauthenticated) {
			t.Errorf("%s while the session was signed out: %v, want ErrUnauthenticated", c.name, err)
		}
		if n := b.events(t) - events; n != 1 {
			t.Errorf("%s while the session was signed out: %d events added, want the sign-out's alone", c.name, n)
		}
		if ms := b.mails(t); len(ms) != 0 {
			t.Errorf("%s while the session was signed out mailed %+v", c.name, ms)
		}
	}
}

// Two changes of address confirmed at once: the one that loses the race
// reloads the account, finds the other confirmed since, and is refused, so
// that the account moves once, from the address it had.
func TestConfirmationsAtOnceMoveTheAccountOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	first := b.changeCode(t, ada.Token, "one@example.com")
	second := b.changeCode(t, ada.Token, "two@example.com")
	svc := interrupted(t, b, func() {
		if _, err := b.svc.ConfirmEmailChange(ctx, second, ada.Token); err != nil {
			t.Errorf("the interrupting confirmation: %v", err)
		}
	})
	if _, err := svc.ConfirmEmailChange(ctx, first, ada.Token); !errors.Is(err, user.ErrInvalidCode) {
		t.Fatalf("the confirmation that lost the race: %v, want ErrInvalidCode", err)
	}
	olds, news := b.addresses(t, user.TypeEmailChanged, "old_email"), b.addresses(t, user.TypeEmailChanged, "new_email")
	if len(olds) != 1 || olds[0] != "ada@example.com" || news[0] != "two@example.com" {
		t.Errorf("EmailChanged moved %q to %q, want one move, from ada@example.com to two@example.com", olds, news)
	}
	if me := b.me(t, ada.Token); me.Email != "two@example.com" {
		t.Errorf("Me: %s, want two@example.com", me.Email)
	}
}

// waitForLockWait waits until some backend of the server waits on a lock
// (other tests on the server may be the ones waiting, which leaves the
// interleaving to chance but the checks as strict), or gives up after 5s.
func waitForLockWait(t *testing.T, b *bundle) {
	t.Helper()
	for range 500 {
		if b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Log("no backend waits on a lock")
}

// The sweep forgets an address whose link was used later than the sweep's
// margin after it was asked for: the use within the window does not keep
// the address, which no decision needs once its links have expired, and
// the stream ends in the bare marker, so that after the account moves on
// and is erased no sign-in event of its former address names it.
func TestTheSweepForgetsAnAddressThatSignedInLate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	code := b.link(t, "ada@example.com", "ada@example.com")
	var stream string
	if err := b.db.Pool().QueryRow(ctx, `SELECT s.name FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name LIKE 'signin-%'`).Scan(&stream); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(10 * time.Minute)
	ada, err := b.svc.SignIn(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	b.mails(t)
	b.clock.Advance(11 * time.Minute) // key expired 6m ago; the use is 11m old
	if n, err := b.svc.ForgetIdleAddresses(ctx); err != nil || n != 1 {
		t.Fatalf("ForgetIdleAddresses = %d, %v", n, err)
	}
	b.clock.Advance(7 * 24 * time.Hour)
	if _, err := b.svc.ForgetIdleAddresses(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name = $1`, stream); n != 1 {
		t.Errorf("a week later the sign-in stream keeps %d events, want the marker alone", n)
	}
	// Ada moves on and is erased: her former address's stream still ties
	// the keyed hash of ada@example.com to her user ID, for good.
	change := b.changeCode(t, ada.Token, "ada.new@example.com")
	if _, err := b.svc.ConfirmEmailChange(ctx, change, ada.Token); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.DeleteAccount(ctx, ada.Token); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name LIKE 'signin-%' AND data->>'user_id' = $1::text`, ada.User.ID); n != 0 {
		t.Errorf("after the erasure %d sign-in events still name the erased user", n)
	}
}

// usedInterruptingViews let interrupt run once SignIn has appended its
// SignInLinkUsed (uncommitted), which deletes the code from the views.
type usedInterruptingViews struct {
	postgres.UserViews
	once      sync.Once
	interrupt func()
}

func (v *usedInterruptingViews) DeleteSignInCode(ctx context.Context, tx uow.Tx, codeHash string) error {
	err := v.UserViews.DeleteSignInCode(ctx, tx, codeHash)
	v.once.Do(v.interrupt)
	return err
}

// A sign-in and the erasure of its account take turns on the address's
// stream instead of deadlocking: the erasure waits for the sign-in that
// holds the stream, and then erases its session too; neither fails
// otherwise than as the domain says.
func TestASignInAndAnErasureOfItsAccountTakeTurns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	code := b.link(t, "ada@example.com", "ada@example.com")
	var delErr error
	done := make(chan struct{})
	svc, err := user.NewService(user.Deps{
		Runner: b.db.Runner(b.clock.Now), Events: b.db.Events(), Outbox: b.db.Outbox(), Keys: b.keys,
		Views: &usedInterruptingViews{UserViews: postgres.UserViews{}, interrupt: func() {
			go func() { defer close(done); delErr = b.svc.DeleteAccount(ctx, ada.Token) }()
			waitForLockWait(t, b)
		}},
	}, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	_, signErr := svc.SignIn(ctx, code)
	<-done
	for name, err := range map[string]error{"SignIn": signErr, "DeleteAccount": delErr} {
		if err != nil && !errors.Is(err, user.ErrInvalidCode) && !errors.Is(err, user.ErrUnauthenticated) {
			t.Errorf("%s racing the other: %v, want success or a domain error", name, err)
		}
	}
}

// pausingKeyStore lets interrupt run once the sweep, holding an address's
// stream, has asked again whether its keys have expired.
type pausingKeyStore struct {
	postgres.DataKeys
	once      sync.Once
	interrupt func()
}

func (s *pausingKeyStore) ExpiredSubjects(ctx context.Context, tx uow.Tx, prefix, after string, now time.Time, limit int) ([]string, error) {
	subjects, err := s.DataKeys.ExpiredSubjects(ctx, tx, prefix, after, now, limit)
	if limit == 1 { // The sweep asks again, holding the stream.
		s.once.Do(s.interrupt)
	}
	return subjects, err
}

var _ keyring.Store = (*pausingKeyStore)(nil)

// The sweep of an idle address and the erasure of its account take turns
// on the address's stream instead of deadlocking, and both succeed.
func TestTheSweepAndAnErasureTakeTurns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	b.clock.Advance(21 * time.Minute) // Ada's sign-in stream is idle, her session live
	var delErr error
	done := make(chan struct{})
	store := &pausingKeyStore{interrupt: func() {
		go func() { defer close(done); delErr = b.svc.DeleteAccount(ctx, ada.Token) }()
		waitForLockWait(t, b)
	}}
	keys := keyringtest.New(t, store)
	sweeper, err := user.NewService(user.Deps{
		Runner: b.db.Runner(b.clock.Now), Events: b.db.Events(), Outbox: b.db.Outbox(), Keys: keys,
		Views: postgres.UserViews{},
	}, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	_, sweepErr := sweeper.ForgetIdleAddresses(ctx)
	<-done
	if delErr != nil {
		t.Errorf("DeleteAccount racing the idle sweep: %v, want nil", delErr)
	}
	if sweepErr != nil {
		t.Errorf("ForgetIdleAddresses racing an erasure: %v, want nil", sweepErr)
	}
}

// takenInterruptingViews let interrupt run once a command has found an
// address taken.
type takenInterruptingViews struct {
	postgres.UserViews
	once      sync.Once
	interrupt func()
}

func (v *takenInterruptingViews) UserByEmail(ctx context.Context, tx uow.Tx, email string) (user.User, bool, error) {
	u, ok, err := v.UserViews.UserByEmail(ctx, tx, email)
	if ok {
		v.once.Do(v.interrupt)
	}
	return u, ok, err
}

// The mail that tells an address's owner that someone asked to move to it
// and the erasure of that owner's account take turns: a mail added first
// goes with the erasure, and one asked for after finds the address free.
func TestAnEmailTakenMailRacingAnErasureGoesWithIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	bob := b.signIn(t, "bob@example.com")
	done := make(chan struct{})
	svc, err := user.NewService(user.Deps{
		Runner: b.db.Runner(b.clock.Now), Events: b.db.Events(), Outbox: b.db.Outbox(), Keys: b.keys,
		Views: &takenInterruptingViews{UserViews: postgres.UserViews{}, interrupt: func() {
			go func() {
				defer close(done)
				if err := b.svc.DeleteAccount(ctx, ada.Token); err != nil {
					t.Errorf("the interrupting erasure: %v", err)
				}
			}()
			waitForLockWait(t, b)
		}},
	}, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.RequestEmailChange(ctx, bob.Token, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	<-done
	b.noMessageHolds(t, "after Ada's erasure", "ada@")
}

// The sweep forgets an address whose keys have expired though its last
// request is still within this instance's LINK_WINDOW, as when a rolling
// deploy raises it: the instance that sealed the address decided how long
// it matters.
func TestTheSweepForgetsAnAddressWhenTheWindowGrew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.link(t, "link.only@example.com", "link.only@example.com")
	wide, err := user.NewService(user.Deps{
		Runner: b.db.Runner(b.clock.Now), Events: b.db.Events(), Outbox: b.db.Outbox(), Keys: b.keys,
		Views: postgres.UserViews{},
	}, user.Policy{LinkWindow: time.Hour}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(21 * time.Minute)
	if _, err := wide.ForgetIdleAddresses(ctx); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(7 * 24 * time.Hour)
	if _, err := wide.ForgetIdleAddresses(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name LIKE 'signin-%' AND type = $1`, user.TypeSignInForgotten); n != 1 {
		t.Errorf("a week later the stream has %d markers, want 1", n)
	}
}
