package user_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

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

// Two changes of address confirmed at once: each EmailChanged records the
// address it moved from, the other's new one for the later.
func TestConfirmationsAtOnceRecordTheAddressTheyMoveFrom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	first := b.changeCode(t, ada.Token, "one@example.com")
	second := b.changeCode(t, ada.Token, "two@example.com")
	svc := interrupted(t, b, func() {
		if _, err := b.svc.ConfirmEmailChange(ctx, second); err != nil {
			t.Errorf("the interrupting confirmation: %v", err)
		}
	})
	if _, err := svc.ConfirmEmailChange(ctx, first); err != nil {
		t.Fatal(err)
	}
	olds, news := b.addresses(t, user.TypeEmailChanged, "old_email"), b.addresses(t, user.TypeEmailChanged, "new_email")
	old, now := olds[len(olds)-1], news[len(news)-1]
	if old != "two@example.com" || now != "one@example.com" {
		t.Errorf("the later EmailChanged moved %q to %q, want two@example.com to one@example.com", old, now)
	}
	if me := b.me(t, ada.Token); me.Email != "one@example.com" {
		t.Errorf("Me: %s, want one@example.com", me.Email)
	}
}
