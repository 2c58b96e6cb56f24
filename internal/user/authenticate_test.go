package user_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// Authenticate answers the user of a live session in the caller's unit
// of work, writing the session's last use as the service's commands do,
// and refuses anything else, a read-only unit of work included.
func TestAuthenticate(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			b := be.setup(t)
			svc := b.service(t, nil)
			ada := b.signIn(t, svc, "ada@example.com")
			other := b.signIn(t, svc, "ada@example.com")

			b.clock.Advance(2 * time.Minute)
			u, err := b.authenticate(t, svc, ada.Token)
			if err != nil {
				t.Fatal(err)
			}
			sameUser(t, "Authenticate", u, ada.User)
			list, err := svc.Sessions(t.Context(), other.Token)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range list {
				if !s.Current && !s.LastUsedAt.Equal(b.clock.Now()) {
					t.Errorf("the authenticated session was last used at %s, want now, %s", s.LastUsedAt, b.clock.Now())
				}
			}

			err = b.deps.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
				_, err := svc.Authenticate(ctx, tx, ada.Token)
				return err
			})
			if !errors.Is(err, uow.ErrReadOnly) {
				t.Errorf("Authenticate in a read-only unit of work: %v, want uow.ErrReadOnly", err)
			}

			if err := svc.SignOut(t.Context(), other.Token); err != nil {
				t.Fatal(err)
			}
			expiring := b.signIn(t, svc, "bob@example.com")
			erased := b.signIn(t, svc, "eve@example.com")
			if err := svc.DeleteAccount(t.Context(), erased.Token); err != nil {
				t.Fatal(err)
			}
			b.clock.Advance(sessionTTL - time.Minute)
			if _, err := b.authenticate(t, svc, expiring.Token); err != nil {
				t.Fatalf("Authenticate a minute before the session expires: %v", err)
			}
			b.clock.Advance(2 * time.Minute)
			for what, token := range map[string]string{
				"no token": "", "no session's token": "abcdefghijklmnopqrstuvwxyz234567",
				"a signed-out session": other.Token, "an expired session": expiring.Token,
				"an erased account's session": erased.Token,
			} {
				if _, err := b.authenticate(t, svc, token); !errors.Is(err, user.ErrUnauthenticated) {
					t.Errorf("Authenticate with %s: %v, want ErrUnauthenticated", what, err)
				}
			}
		})
	}
}

// An erasure that commits after Authenticate has read the session, and
// before it holds the account's stream, is seen: Authenticate reads the
// session and the account again once it holds the stream, and refuses.
// (PostgreSQL alone: on SQLite no writer runs between the two.)
func TestAuthenticateSeesAnErasureBeforeItHeldTheAccount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	other, err := b.svc.SignIn(ctx, b.link(t, "ada@example.com", "ada@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := user.NewService(user.Deps{
		Runner: b.db.Runner(b.clock.Now), Events: b.db.Events(), Outbox: b.db.Outbox(), Keys: b.keys,
		Views: &erasingViews{UserViews: postgres.UserViews{}, interrupt: func() {
			if err := b.svc.DeleteAccount(ctx, other.Token); err != nil {
				t.Errorf("the interrupting erasure: %v", err)
			}
		}},
	}, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	noted := false
	err = b.db.Runner(b.clock.Now).Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		u, err := svc.Authenticate(ctx, tx, ada.Token)
		if err != nil {
			return err
		}
		noted = true
		return appendNote(ctx, b.db.Events(), tx, u.ID, "joined")
	})
	if !errors.Is(err, user.ErrUnauthenticated) || noted {
		t.Errorf("Authenticate across the account's erasure: %v, went on %t; want ErrUnauthenticated", err, noted)
	}
}
