package org_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// meetingEvents is an event store whose first loads of an organization's
// stream, n of them, wait for each other: n commands that load one
// organization at once all decide on the same version, and all but one
// lose the race to append. Later loads, those of the commands tried
// again, pass. It serves where units of work run at once
// (database.interleaves); on SQLite they take turns, and the commands
// race for the writer instead.
type meetingEvents struct {
	eventstore.Store
	mu      sync.Mutex
	waiting int
	met     chan struct{}
}

func meeting(store eventstore.Store, n int) *meetingEvents {
	return &meetingEvents{Store: store, waiting: n, met: make(chan struct{})}
}

func (m *meetingEvents) Load(ctx context.Context, tx uow.Tx, stream string, from int64) ([]eventstore.Event, error) {
	events, err := m.Store.Load(ctx, tx, stream, from)
	if !strings.HasPrefix(stream, org.CategoryOrg+"-") {
		return events, err
	}
	m.mu.Lock()
	first := m.waiting > 0
	if first {
		m.waiting--
		if m.waiting == 0 {
			close(m.met)
		}
	}
	m.mu.Unlock()
	if first {
		// A racer that failed before its load would hold the others
		// for ever: they give up waiting after a while, and the test
		// then fails on what they did.
		select {
		case <-m.met:
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return events, err
}

// racing returns a service on b's database for each of n commands that
// are to race: on PostgreSQL they share an event store at which they meet
// once loaded (meetingEvents).
func (b *bundle) racing(t *testing.T, n int) []*org.Service {
	t.Helper()
	events := b.Events()
	if b.db.interleaves {
		events = meeting(events, n)
	}
	out := make([]*org.Service, n)
	for i := range out {
		out[i] = b.newService(t, org.Policy{}, events, b.OrgViews())
	}
	return out
}

// race runs each function at once, and returns their errors in order.
func race(fns ...func() error) []error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	return errs
}

// Two owners who demote each other at once leave one owner: the command
// that loses the race finds, tried again, that it demotes nobody, since
// its caller is an owner no more.
func TestOwnersDemotingEachOtherLeaveOne(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com")
		o := b.create(t, ada.Token, "Engines")
		b.join(t, ada.Token, o.ID, bob, org.RoleOwner)
		svcs := b.racing(t, 2)
		errs := race(
			func() error {
				_, err := svcs[0].ChangeRole(ctx, ada.Token, o.ID, bob.User.ID, org.RoleMember)
				return err
			},
			func() error {
				_, err := svcs[1].ChangeRole(ctx, bob.Token, o.ID, ada.User.ID, org.RoleMember)
				return err
			},
		)
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else if !errors.Is(err, org.ErrNotOwner) {
				t.Errorf("the demotion that lost: %v, want ErrNotOwner", err)
			}
		}
		roles := b.roles(t, ada.Token, o.ID)
		if won != 1 || strings.Count(roles, ":owner") != 1 {
			t.Errorf("%d demotions succeeded (%v), leaving %s; want one, and one owner", won, errs, roles)
		}
	})
}

// Two acceptances of one code make one membership: the second finds the
// code used. The account's stream, which each acceptance holds once it
// has authenticated, makes them take turns.
func TestAcceptingOneCodeTwiceAtOnce(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada := b.signIn(t, "ada@example.com")
		o := b.create(t, ada.Token, "Engines")
		code := b.invite(t, ada.Token, o.ID, "bob@example.com", org.RoleMember)
		first, second := b.signIn(t, "bob@example.com"), b.signIn(t, "bob@example.com")
		errs := race(
			func() error { _, err := b.svc.Accept(ctx, first.Token, code); return err },
			func() error { _, err := b.svc.Accept(ctx, second.Token, code); return err },
		)
		if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), org.ErrInvalidCode) {
			t.Errorf("the acceptances: %v, want one to succeed and the other ErrInvalidCode", errs)
		}
		if got := b.roles(t, ada.Token, o.ID); got != "ada@example.com:owner bob@example.com:member" {
			t.Errorf("the members are %s", got)
		}
		added := 0
		for _, e := range b.log(t) {
			if e.Type == org.TypeMemberAdded {
				added++
			}
		}
		if added != 2 {
			t.Errorf("%d members added, want Ada and Bob once", added)
		}
	})
}

// An acceptance racing a revocation: one wins, and the other is told
// why: the code is no longer valid, or the invitation is no longer
// pending.
func TestAcceptRacingRevoke(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com")
		o := b.create(t, ada.Token, "Engines")
		code := b.invite(t, ada.Token, o.ID, "bob@example.com", org.RoleMember)
		invs, err := b.svc.Invitations(ctx, ada.Token, o.ID)
		if err != nil || len(invs) != 1 {
			t.Fatalf("Invitations = %+v (%v)", invs, err)
		}
		svcs := b.racing(t, 2)
		errs := race(
			func() error { _, err := svcs[0].Accept(ctx, bob.Token, code); return err },
			func() error { return svcs[1].Revoke(ctx, ada.Token, o.ID, invs[0].ID) },
		)
		roles := b.roles(t, ada.Token, o.ID)
		switch accepted, revoked := errs[0], errs[1]; {
		case accepted == nil && errors.Is(revoked, org.ErrNotFound):
			if roles != "ada@example.com:owner bob@example.com:member" {
				t.Errorf("the acceptance won, and the members are %s", roles)
			}
		case revoked == nil && errors.Is(accepted, org.ErrInvalidCode):
			if roles != "ada@example.com:owner" {
				t.Errorf("the revocation won, and the members are %s", roles)
			}
		default:
			t.Errorf("Accept: %v, Revoke: %v; want one to succeed and the other ErrInvalidCode or ErrNotFound", accepted, revoked)
		}
		if _, err := b.svc.Offer(ctx, code); !errors.Is(err, org.ErrInvalidCode) {
			t.Errorf("Offer after the race: %v, want ErrInvalidCode", err)
		}
	})
}

// lockErrors is an event store that keeps the errors of its locks.
type lockErrors struct {
	eventstore.Store
	mu   sync.Mutex
	errs []error
}

func (l *lockErrors) Lock(ctx context.Context, tx uow.Tx, stream string) error {
	err := l.Store.Lock(ctx, tx, stream)
	if err != nil {
		l.mu.Lock()
		l.errs = append(l.errs, err)
		l.mu.Unlock()
	}
	return err
}

// Two owners who invite each other's addresses at once both invite, and
// neither waits for the other: each command holds the stream of the
// account it invites and no other. On PostgreSQL the commands meet once
// both have loaded their organizations, so that a command holding its
// caller's stream too would deadlock, which the server breaks by failing
// one lock.
func TestOwnersInvitingEachOtherAtOnce(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		ada, bob := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com")
		engines, gears := b.create(t, ada.Token, "Engines"), b.create(t, bob.Token, "Gears")
		locks := &lockErrors{Store: b.Events()}
		var events eventstore.Store = locks
		if b.db.interleaves {
			events = meeting(locks, 2)
		}
		svcs := []*org.Service{b.newService(t, org.Policy{}, events, b.OrgViews()), b.newService(t, org.Policy{}, events, b.OrgViews())}
		errs := race(
			func() error { return svcs[0].Invite(ctx, ada.Token, engines.ID, "bob@example.com", org.RoleMember) },
			func() error { return svcs[1].Invite(ctx, bob.Token, gears.ID, "ada@example.com", org.RoleMember) },
		)
		if err := errors.Join(errs...); err != nil {
			t.Errorf("the invitations: %v", err)
		}
		if err := errors.Join(locks.errs...); err != nil {
			t.Errorf("a lock failed: %v", err)
		}
		b.mail(t, mail.TopicOrgInvitation, "bob@example.com")
		b.mail(t, mail.TopicOrgInvitation, "ada@example.com")
	})
}

// lockedUsers authenticates as the user service does and then, the first
// time, runs the account's erasure beside the command, and waits until
// that erasure is held up by the account's stream, which the command
// holds, or has finished.
type lockedUsers struct {
	org.Authenticator
	once  sync.Once
	erase func()
}

func (u *lockedUsers) Authenticate(ctx context.Context, tx uow.Tx, token string) (user.User, error) {
	got, err := u.Authenticator.Authenticate(ctx, tx, token)
	if err == nil {
		u.once.Do(u.erase)
	}
	return got, err
}

// A command that adds an account to an organization, racing the
// account's erasure, either commits first, and the erasure takes the
// account out again, or finds no session: no organization keeps a
// member whose account is erased.
func TestErasureRacingCommandsThatAddTheAccount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		run  func(b *bundle, svc *org.Service, token, code string) error
	}{
		{"Create", func(b *bundle, svc *org.Service, token, _ string) error {
			_, err := svc.Create(context.Background(), token, "Bob's")
			return err
		}},
		{"Accept", func(b *bundle, svc *org.Service, token, code string) error {
			_, err := svc.Accept(context.Background(), token, code)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			onEach(t, func(t *testing.T, b *bundle) {
				ctx := t.Context()
				ada, bob := b.signIn(t, "ada@example.com"), b.signIn(t, "bob@example.com")
				o := b.create(t, ada.Token, "Engines")
				code := b.invite(t, ada.Token, o.ID, "bob@example.com", org.RoleMember)
				erased := make(chan error, 1)
				users := &lockedUsers{Authenticator: b.users, erase: func() {
					go func() { erased <- b.users.DeleteAccount(ctx, bob.Token) }()
					b.waitForErasure(t, erased)
				}}
				svc, err := org.NewService(org.Deps{
					Runner: b.Runner(b.clock.Now), Events: b.Events(), Outbox: b.Outbox(), Views: b.OrgViews(),
					Users: users, UserViews: b.Views(), Keys: b.keys,
				}, org.Policy{}, baseURL)
				if err != nil {
					t.Fatal(err)
				}
				cmdErr := c.run(b, svc, bob.Token, code)
				if err := <-erased; err != nil {
					t.Fatalf("the erasure: %v", err)
				}
				if cmdErr != nil && !errors.Is(cmdErr, user.ErrUnauthenticated) {
					t.Errorf("%s racing the erasure: %v, want success or ErrUnauthenticated", c.name, cmdErr)
				}
				if got := b.roles(t, ada.Token, o.ID); got != "ada@example.com:owner" {
					t.Errorf("Engines' members after the erasure: %s", got)
				}
				for _, r := range b.rows(t) {
					if id, _ := r.Value("user_id"); r.Table == "org_members" && id == bob.User.ID.String() {
						t.Errorf("a members' row of the erased account is left: %s", r)
					}
				}
			})
		})
	}
}

// waitForErasure waits until the erasure under way is held up by a lock
// (PostgreSQL: another unit of work of the server waits on a lock, which
// may be another test's, and leaves the order to chance but the checks
// as strict; or gives up after 5s), or has ended, and puts its outcome
// back. On SQLite the erasure waits for the writer, which the command
// holds, until the command ends: there is nothing to wait for.
func (b *bundle) waitForErasure(t *testing.T, erased chan error) {
	t.Helper()
	db, ok := b.Backend.(*postgres.DB)
	if !ok {
		return
	}
	for range 500 {
		select {
		case err := <-erased:
			erased <- err
			return
		default:
		}
		var waiting int
		err := db.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Error(err)
			return
		}
		if waiting > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
