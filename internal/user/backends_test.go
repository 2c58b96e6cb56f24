package user_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
	"github.com/eventsourced/accounts/internal/user/mail/mailtest"
)

// onBackend is a service's set-up on one backend, for the tests of what
// the user domain offers other domains' commands, which run on both.
type onBackend struct {
	deps  user.Deps
	clock *testclock.Clock
	// waitedOn returns, in the unit of work tx, a probe that reports
	// whether another unit of work waits for a stream that tx holds
	// ([eventstore.Store.Lock]). It is nil on a backend whose writing
	// units of work run one at a time (SQLite's one writer), where no
	// other can begin while tx runs.
	waitedOn func(t *testing.T, tx uow.Tx) func() bool
}

// backends are the set-ups of both backends, by name.
var backends = []struct {
	name  string
	setup func(t *testing.T) *onBackend
}{
	{"PostgreSQL", func(t *testing.T) *onBackend {
		db := pgtest.New(t)
		b := &onBackend{clock: testclock.New(start)}
		b.deps = user.Deps{
			Runner: db.Runner(b.clock.Now), Events: db.Events(), Outbox: db.Outbox(),
			Views: postgres.UserViews{}, Keys: keyringtest.New(t, postgres.DataKeys{}),
		}
		b.waitedOn = func(t *testing.T, tx uow.Tx) func() bool {
			q, err := postgres.PgxTx(tx)
			if err != nil {
				t.Error(err)
				return func() bool { return true }
			}
			var pid int32
			if err := q.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				t.Error(err)
			}
			return func() bool {
				var waits bool
				err := db.Pool().QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_locks AS w
WHERE NOT w.granted AND w.locktype = 'advisory' AND $1 = ANY (pg_blocking_pids(w.pid)))`, pid).Scan(&waits)
				if err != nil {
					t.Error(err)
					return true
				}
				return waits
			}
		}
		return b
	}},
	{"SQLite", func(t *testing.T) *onBackend {
		db := sqlitetest.New(t)
		b := &onBackend{clock: testclock.New(start)}
		b.deps = user.Deps{
			Runner: db.Runner(b.clock.Now), Events: db.Events(), Outbox: db.Outbox(),
			Views: sqlite.UserViews{}, Keys: keyringtest.New(t, sqlite.DataKeys{}),
		}
		return b
	}},
}

// service returns a service on b's stores, with the event store that
// events returns, when not nil, and opts.
func (b *onBackend) service(t *testing.T, events func(eventstore.Store) eventstore.Store, opts ...user.Option) *user.Service {
	t.Helper()
	d := b.deps
	if events != nil {
		d.Events = events(d.Events)
	}
	svc, err := user.NewService(d, user.Policy{}, baseURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// signIn signs in to email's account with a link of its own.
func (b *onBackend) signIn(t *testing.T, svc *user.Service, email string) user.Session {
	t.Helper()
	if err := svc.RequestSignInLink(t.Context(), email); err != nil {
		t.Fatal(err)
	}
	sent := b.mails(t)
	if len(sent) != 1 || sent[0].Topic != mail.TopicLoginLink {
		t.Fatalf("mails %+v, want one sign-in link", sent)
	}
	s, err := svc.SignIn(t.Context(), sent[0].Link.Code)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mails takes every mail from the outbox.
func (b *onBackend) mails(t *testing.T) []mailtest.Sent {
	t.Helper()
	return mailtest.Take(t, b.deps.Outbox, b.clock.Now().Add(100*365*24*time.Hour))
}

// authenticate runs Authenticate with token in a unit of work of its own.
func (b *onBackend) authenticate(t *testing.T, svc *user.Service, token string) (user.User, error) {
	t.Helper()
	var u user.User
	err := b.deps.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var err error
		u, err = svc.Authenticate(ctx, tx, token)
		return err
	})
	return u, err
}

// noteStream is the stream of the notes that the tests' units of work
// write for the account id, as another domain's command would write
// what it keeps of the account.
func noteStream(id uuid.UUID) string { return "note-" + id.String() }

// note appends a note to the notes of the account id, in tx.
func (b *onBackend) note(ctx context.Context, tx uow.Tx, id uuid.UUID, what string) error {
	return appendNote(ctx, b.deps.Events, tx, id, what)
}

// appendNote appends a note to the notes of the account id in events, in
// tx.
func appendNote(ctx context.Context, events eventstore.Store, tx uow.Tx, id uuid.UUID, what string) error {
	e, err := eventstore.NewEvent("test.noted", map[string]string{"what": what}, eventstore.Metadata{})
	if err != nil {
		return err
	}
	_, err = events.Append(ctx, tx, noteStream(id), eventstore.Any, e)
	return err
}

// notes returns how many notes tx sees of the account id.
func (b *onBackend) notes(ctx context.Context, tx uow.Tx, id uuid.UUID) (int, error) {
	events, err := b.deps.Events.Load(ctx, tx, noteStream(id), 0)
	return len(events), err
}

// committedNotes returns how many notes of the account id have committed.
func (b *onBackend) committedNotes(t *testing.T, id uuid.UUID) int {
	t.Helper()
	var n int
	err := b.deps.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var err error
		n, err = b.notes(ctx, tx, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
