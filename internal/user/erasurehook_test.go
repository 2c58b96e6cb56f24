package user_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// hookCall is what an erasure hook saw.
type hookCall struct {
	user user.User
	// erased says whether the account's stream ended in user.erased.
	erased bool
	// notes is how many notes of the account the hook saw.
	notes int
}

// recorder is an erasure hook that records what it sees and notes the
// erasure, then returns what fail says.
type recorder struct {
	b    *onBackend
	mu   sync.Mutex
	got  []hookCall
	fail func(call int) error
	// ran is closed when it first runs.
	ran  chan struct{}
	once sync.Once
}

func newRecorder(b *onBackend, fail func(call int) error) *recorder {
	return &recorder{b: b, fail: fail, ran: make(chan struct{})}
}

func (r *recorder) hook(ctx context.Context, tx uow.Tx, u user.User) error {
	r.once.Do(func() { close(r.ran) })
	c := hookCall{user: u}
	events, err := r.b.deps.Events.Load(ctx, tx, "user-"+u.ID.String(), 0)
	if err != nil {
		return err
	}
	c.erased = len(events) > 0 && events[len(events)-1].Type == user.TypeErased
	if c.notes, err = r.b.notes(ctx, tx, u.ID); err != nil {
		return err
	}
	r.mu.Lock()
	r.got = append(r.got, c)
	n := len(r.got)
	r.mu.Unlock()
	if err := r.b.note(ctx, tx, u.ID, "erased"); err != nil {
		return err
	}
	if r.fail != nil {
		return r.fail(n)
	}
	return nil
}

func (r *recorder) calls() []hookCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookCall(nil), r.got...)
}

// The hooks of WithErasure run in the erasure's unit of work, in order,
// with the account, before user.erased: what they write commits with
// the erasure; a hook's error fails it, and nothing of it or of the
// hooks is left; a hook's lost race runs the erasure again.
func TestErasureHooks(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			t.Run("RunInTheErasure", func(t *testing.T) {
				t.Parallel()
				b := be.setup(t)
				first, second := newRecorder(b, nil), newRecorder(b, nil)
				svc := b.service(t, nil, user.WithErasure(first.hook), user.WithErasure(second.hook))
				ada := b.signIn(t, svc, "ada@example.com")
				if err := svc.DeleteAccount(t.Context(), ada.Token); err != nil {
					t.Fatal(err)
				}
				for i, r := range []*recorder{first, second} {
					calls := r.calls()
					if len(calls) != 1 {
						t.Fatalf("hook %d ran %d times, want once", i+1, len(calls))
					}
					sameUser(t, fmt.Sprintf("hook %d's user", i+1), calls[0].user, ada.User)
					if calls[0].erased {
						t.Errorf("hook %d ran after user.erased was appended", i+1)
					}
					if calls[0].notes != i {
						t.Errorf("hook %d saw %d notes, want %d: the hooks run in order, in one unit of work", i+1, calls[0].notes, i)
					}
				}
				if n := b.committedNotes(t, ada.User.ID); n != 2 {
					t.Errorf("%d notes of the hooks committed, want 2", n)
				}
			})
			t.Run("ErrorChangesNothing", func(t *testing.T) {
				t.Parallel()
				b := be.setup(t)
				boom := errors.New("boom")
				r := newRecorder(b, func(int) error { return boom })
				svc := b.service(t, nil, user.WithErasure(r.hook))
				ada := b.signIn(t, svc, "ada@example.com")
				if err := svc.RequestSignInLink(t.Context(), "ada@example.com"); err != nil {
					t.Fatal(err)
				}
				if err := svc.DeleteAccount(t.Context(), ada.Token); !errors.Is(err, boom) {
					t.Fatalf("DeleteAccount with a failing hook: %v, want its error", err)
				}
				if len(r.calls()) != 1 {
					t.Errorf("the failing hook ran %d times, want once", len(r.calls()))
				}
				if n := b.committedNotes(t, ada.User.ID); n != 0 {
					t.Errorf("%d notes of the failed erasure's hook committed, want none", n)
				}
				sameUser(t, "Me after the failed erasure", func() user.User {
					u, err := svc.Me(t.Context(), ada.Token)
					if err != nil {
						t.Fatalf("Me after the failed erasure: %v", err)
					}
					return u
				}(), ada.User)
				if ms := b.mails(t); len(ms) != 1 || ms[0].Link.To != "ada@example.com" {
					t.Errorf("after the failed erasure the outbox holds %+v, want the link to Ada", ms)
				}
			})
			t.Run("LostRaceRunsItAgain", func(t *testing.T) {
				t.Parallel()
				b := be.setup(t)
				r := newRecorder(b, func(call int) error {
					if call == 1 {
						return fmt.Errorf("someone else moved: %w", eventstore.ErrConcurrency)
					}
					return nil
				})
				svc := b.service(t, nil, user.WithErasure(r.hook))
				ada := b.signIn(t, svc, "ada@example.com")
				if err := svc.DeleteAccount(t.Context(), ada.Token); err != nil {
					t.Fatalf("DeleteAccount with a hook that lost a race once: %v", err)
				}
				if calls := r.calls(); len(calls) != 2 || calls[1].notes != 0 {
					t.Errorf("the hook ran %d times, seeing %+v; want twice, the second seeing no note of the first", len(calls), calls)
				}
				if n := b.committedNotes(t, ada.User.ID); n != 1 {
					t.Errorf("%d notes committed, want the second run's", n)
				}
			})
		})
	}
}
