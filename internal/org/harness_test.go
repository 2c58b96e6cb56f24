package org_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/dbdump"
	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
	"github.com/eventsourced/accounts/internal/user/mail/mailtest"
)

const baseURL = "https://accounts.test"

// start is where every test's clock begins: a whole second, so that the
// microsecond truncation of the unit of work changes nothing.
var start = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

// database is a backend the tests run on.
type database struct {
	name string
	// open returns a fresh, migrated database, closed and removed when
	// t ends, and a function that lists every row of every table of it.
	open func(t *testing.T) (backend.Backend, func(t *testing.T) []dbdump.Row)
	// interleaves says that two units of work that write can run at
	// once, as on PostgreSQL; on SQLite they take turns.
	interleaves bool
}

var databases = []database{
	{name: "postgres", interleaves: true, open: func(t *testing.T) (backend.Backend, func(t *testing.T) []dbdump.Row) {
		db := pgtest.New(t)
		return db, func(t *testing.T) []dbdump.Row { return dbdump.Postgres(t, db.Pool()) }
	}},
	{name: "sqlite", open: func(t *testing.T) (backend.Backend, func(t *testing.T) []dbdump.Row) {
		path := filepath.Join(t.TempDir(), "test.db")
		db := sqlitetest.NewAt(t, path)
		return db, func(t *testing.T) []dbdump.Row { return dbdump.SQLite(t, path) }
	}},
}

// bundle is one test's services on a database of their own, with a
// clock the test moves by hand.
type bundle struct {
	backend.Backend
	db    database
	rows  func(t *testing.T) []dbdump.Row
	users *user.Service
	svc   *org.Service
	keys  *keyring.Keyring
	// clock is the runner's; goroutines of the concurrency tests read it.
	clock *testclock.Clock
	// mails are those taken from the outbox and not yet looked at.
	mails []mailtest.Sent
	// integration are the destinations of the services' integration
	// events; the zero value has none.
	integration publish.Events
}

// onEach runs test as a parallel subtest on each database, with a fresh
// bundle of its own.
func onEach(t *testing.T, test func(t *testing.T, b *bundle)) {
	t.Helper()
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			test(t, setup(t, db, org.Policy{}))
		})
	}
}

func setup(t *testing.T, db database, p org.Policy) *bundle {
	t.Helper()
	return setupPublishing(t, db, p, publish.Events{})
}

// setupPublishing is setup with services that publish integration events
// to the destinations of events, both the user's and the organizations'.
func setupPublishing(t *testing.T, db database, p org.Policy, events publish.Events) *bundle {
	t.Helper()
	be, rows := db.open(t)
	b := &bundle{Backend: be, db: db, rows: rows, clock: testclock.New(start), keys: keyringtest.New(t, be.DataKeys()), integration: events}
	users, err := user.NewService(user.Deps{
		Runner: be.Runner(b.clock.Now), Events: be.Events(), Outbox: be.Outbox(), Views: be.Views(), Keys: b.keys,
	}, user.Policy{}, baseURL, user.WithIntegrationEvents(events), user.WithErasure(func(ctx context.Context, tx uow.Tx, u user.User) error {
		return b.svc.Erased(ctx, tx, u)
	}))
	if err != nil {
		t.Fatal(err)
	}
	b.users = users
	b.svc = b.newService(t, p, be.Events(), be.OrgViews())
	return b
}

// newService returns an organizations service on b's database, with its
// events and views.
func (b *bundle) newService(t *testing.T, p org.Policy, events eventstore.Store, views org.Views) *org.Service {
	t.Helper()
	svc, err := org.NewService(org.Deps{
		Runner: b.Runner(b.clock.Now), Events: events, Outbox: b.Outbox(), Views: views,
		Users: b.users, UserViews: b.Views(), Keys: b.keys,
	}, p, baseURL, org.WithIntegrationEvents(b.integration))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// take moves the mail added to the outbox since the last call into
// b.mails, as a relay would deliver it.
func (b *bundle) take(t *testing.T) {
	t.Helper()
	b.mails = append(b.mails, mailtest.Take(t, b.Outbox(), b.clock.Now().Add(100*365*24*time.Hour))...)
}

// mail returns the oldest mail of topic to the address to, and forgets
// it; it fails t when there is none.
func (b *bundle) mail(t *testing.T, topic, to string) mailtest.Sent {
	t.Helper()
	b.take(t)
	for i, m := range b.mails {
		if m.Topic == topic && m.Link.To == to {
			b.mails = slices.Delete(b.mails, i, i+1)
			return m
		}
	}
	t.Fatalf("no mail on %s to %s among %+v", topic, to, b.mails)
	return mailtest.Sent{}
}

// noMail checks that no mail of topic was added since the last look.
func (b *bundle) noMail(t *testing.T, what, topic string) {
	t.Helper()
	b.take(t)
	for _, m := range b.mails {
		if m.Topic == topic {
			t.Errorf("%s mailed %+v", what, m)
		}
	}
}

// signIn signs the address in, a new account the first time, and returns
// the session.
func (b *bundle) signIn(t *testing.T, email string) user.Session {
	t.Helper()
	if err := b.users.RequestSignInLink(t.Context(), email); err != nil {
		t.Fatal(err)
	}
	s, err := b.users.SignIn(t.Context(), b.mail(t, mail.TopicLoginLink, email).Link.Code)
	if err != nil {
		t.Fatalf("SignIn for %s: %v", email, err)
	}
	return s
}

// create creates an organization named name with the session token.
func (b *bundle) create(t *testing.T, token, name string) org.Organization {
	t.Helper()
	o, err := b.svc.Create(t.Context(), token, name)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	return o
}

// invite invites the address into id with the role, and returns the code
// of the mail.
func (b *bundle) invite(t *testing.T, token string, id uuid.UUID, email string, role org.Role) string {
	t.Helper()
	if err := b.svc.Invite(t.Context(), token, id, email, role); err != nil {
		t.Fatalf("Invite(%s, %s): %v", email, role, err)
	}
	return b.mail(t, mail.TopicOrgInvitation, email).Link.Code
}

// join invites the session's address into id with the role, and accepts
// the invitation with the session.
func (b *bundle) join(t *testing.T, owner string, id uuid.UUID, s user.Session, role org.Role) {
	t.Helper()
	if _, err := b.svc.Accept(t.Context(), s.Token, b.invite(t, owner, id, s.User.Email, role)); err != nil {
		t.Fatalf("Accept by %s: %v", s.User.Email, err)
	}
}

// get returns the organization id as the session's account sees it.
func (b *bundle) get(t *testing.T, token string, id uuid.UUID) org.Details {
	t.Helper()
	d, err := b.svc.Get(t.Context(), token, id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return d
}

// roles returns the members of id by address, with their roles, as the
// session's account sees them.
func (b *bundle) roles(t *testing.T, token string, id uuid.UUID) string {
	t.Helper()
	var out []string
	for _, m := range b.get(t, token, id).Members {
		out = append(out, m.Email+":"+string(m.Role))
	}
	return strings.Join(out, " ")
}

// log returns every event of the log, in its order.
func (b *bundle) log(t *testing.T) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	err := b.Runner(nil).Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var after eventstore.Position
		for {
			page, err := b.Events().ReadCommitted(ctx, tx, after, 1000)
			if err != nil || len(page) == 0 {
				return err
			}
			out = append(out, page...)
			after = page[len(page)-1].Position
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mark returns the position of the last event of the log, for since.
func (b *bundle) mark(t *testing.T) eventstore.Position {
	t.Helper()
	log := b.log(t)
	if len(log) == 0 {
		return eventstore.Position{}
	}
	return log[len(log)-1].Position
}

// since returns the events of the log after the position mark.
func (b *bundle) since(t *testing.T, mark eventstore.Position) []eventstore.Event {
	t.Helper()
	var out []eventstore.Event
	for _, e := range b.log(t) {
		if mark.Less(e.Position) {
			out = append(out, e)
		}
	}
	return out
}

// types returns the types of the events of the organizations' streams in
// the log after the position mark, in its order.
func (b *bundle) types(t *testing.T, mark eventstore.Position) []string {
	t.Helper()
	var out []string
	for _, e := range b.since(t, mark) {
		if strings.HasPrefix(e.Stream, org.CategoryOrg+"-") {
			out = append(out, e.Type)
		}
	}
	return out
}

// dump returns every row of every table of the database, one a line,
// as [dbdump.Text] renders them.
func (b *bundle) dump(t *testing.T) string {
	t.Helper()
	return dbdump.Text(b.rows(t))
}

// domainTables are the tables whose rows a refused command must leave as
// they are: the log, the outbox, the keys and the domain's views. A
// session's last use, which any command may write, is not among them.
var domainTables = []string{"event_streams", "events", "outbox_messages", "data_keys", "organizations", "org_members", "org_invitations", "org_invitations_sent"}

// snapshot returns the rows of domainTables, as [bundle.dump] does.
func (b *bundle) snapshot(t *testing.T) string {
	t.Helper()
	var out []dbdump.Row
	for _, r := range b.rows(t) {
		if slices.Contains(domainTables, r.Table) {
			out = append(out, r)
		}
	}
	return dbdump.Text(out)
}

// unchanged checks that the rows of domainTables are those of before.
func (b *bundle) unchanged(t *testing.T, what string, before string) {
	t.Helper()
	if after := b.snapshot(t); after != before {
		t.Errorf("%s changed the database:\nbefore\n%s\nafter\n%s", what, before, after)
	}
}

// wantErr checks that err is want.
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

// eventsText returns the data of every event of the log.
func (b *bundle) eventsText(t *testing.T) string {
	t.Helper()
	var sb strings.Builder
	for _, e := range b.log(t) {
		sb.Write(e.Data)
		sb.WriteString("\n")
	}
	return sb.String()
}

// openAddresses returns the addresses of the invitations of the log
// whose keys still open them ([org.Address]).
func (b *bundle) openAddresses(t *testing.T) []string {
	t.Helper()
	var out []string
	err := b.Runner(nil).Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		for _, e := range b.log(t) {
			if e.Type != org.TypeInvitationSent {
				continue
			}
			d, err := org.Decode[org.InvitationSent](e)
			if err != nil {
				return err
			}
			if !keyring.Sealed(d.Email) {
				return fmt.Errorf("invitation %s holds its address unsealed", d.InvitationID)
			}
			email, ok, err := org.Address(ctx, tx, b.keys, d)
			if err != nil {
				return err
			}
			if ok {
				out = append(out, email)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// erased checks that the log opens no invitation to an address that
// holds any of fragments, and that no row of the database holds one.
func (b *bundle) erased(t *testing.T, what string, fragments ...string) {
	t.Helper()
	opened := b.openAddresses(t)
	dump := b.dump(t)
	for _, f := range fragments {
		for _, a := range opened {
			if strings.Contains(a, f) {
				t.Errorf("%s: the log still opens an invitation to %s", what, a)
			}
		}
		if i := strings.Index(dump, f); i >= 0 {
			t.Errorf("%s: the database still holds %q: ...%s...", what, f, dump[max(i-300, 0):min(i+300, len(dump))])
		}
	}
}
