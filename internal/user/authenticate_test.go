package user_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
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

// lockSignal is an event store that closes locking when a unit of work
// is about to hold stream.
type lockSignal struct {
	eventstore.Store
	stream  string
	locking chan struct{}
	once    sync.Once
}

func (l *lockSignal) Lock(ctx context.Context, tx uow.Tx, stream string) error {
	if stream == l.stream {
		l.once.Do(func() { close(l.locking) })
	}
	return l.Store.Lock(ctx, tx, stream)
}

// A unit of work that authenticated a session holds its account: the
// account's erasure, begun meanwhile, waits until it commits, and then
// its hook sees what it wrote. On PostgreSQL the test waits until the
// erasure waits for the account's stream before it lets the first
// commit; on SQLite, whose writers take turns, the erasure cannot begin
// before.
func TestAuthenticateAndAnErasureTakeTurns(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			b := be.setup(t)
			ctx := t.Context()
			plain := b.service(t, nil)
			ada := b.signIn(t, plain, "ada@example.com")
			other := b.signIn(t, plain, "ada@example.com")
			r := newRecorder(b, nil)
			signal := &lockSignal{stream: "user-" + ada.User.ID.String(), locking: make(chan struct{})}
			eraser := b.service(t, func(s eventstore.Store) eventstore.Store { signal.Store = s; return signal }, user.WithErasure(r.hook))

			// The first unit of work authenticates, notes what it keeps
			// of the account, and holds until released.
			var (
				wg                    sync.WaitGroup
				firstErr, eraseErr    error
				probe                 func() bool
				held, release         = make(chan struct{}), make(chan struct{})
				firstDone, erasedDone = make(chan struct{}), make(chan struct{})
				once                  sync.Once
			)
			finish := func() { once.Do(func() { close(release); wg.Wait() }) }
			defer finish()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(firstDone)
				firstErr = b.deps.Runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
					u, err := plain.Authenticate(ctx, tx, ada.Token)
					if err != nil {
						return err
					}
					if err := b.note(ctx, tx, u.ID, "joined"); err != nil {
						return err
					}
					if b.waitedOn != nil {
						probe = b.waitedOn(t, tx)
					}
					close(held)
					<-release
					return nil
				})
			}()
			select {
			case <-held:
			case <-firstDone:
				t.Fatalf("the first unit of work: %v", firstErr)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(erasedDone)
				eraseErr = eraser.DeleteAccount(ctx, other.Token)
			}()
			if probe != nil {
				select {
				case <-signal.locking:
				case <-r.ran:
					t.Fatal("the erasure ran its hook before it held the account's stream")
				case <-erasedDone:
					t.Fatalf("the erasure ended while the account was held: %v", eraseErr)
				}
				for !probe() {
					select {
					case <-r.ran:
						t.Fatal("the erasure ran its hook while the account was held")
					case <-erasedDone:
						t.Fatalf("the erasure ended while the account was held: %v", eraseErr)
					default:
					}
				}
			}
			select {
			case <-r.ran:
				t.Fatal("the erasure ran its hook while the account was held")
			default:
			}
			finish()
			if firstErr != nil {
				t.Fatalf("the first unit of work: %v", firstErr)
			}
			if eraseErr != nil {
				t.Fatalf("the erasure: %v", eraseErr)
			}
			if calls := r.calls(); len(calls) != 1 || calls[0].notes != 1 {
				t.Errorf("the erasure's hook saw %+v, want once, with the first unit of work's note", calls)
			}
			if _, err := b.authenticate(t, plain, ada.Token); !errors.Is(err, user.ErrUnauthenticated) {
				t.Errorf("Authenticate after the erasure: %v, want ErrUnauthenticated", err)
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
