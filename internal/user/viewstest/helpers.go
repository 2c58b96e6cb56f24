package viewstest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
	"github.com/eventsourced/accounts/internal/user/mail/mailtest"
)

// start is where every case's clock begins: a whole second, so that the
// microsecond the stores keep changes no time the suite compares.
var start = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

// The policy of the suite's service, spelled out so that the times the
// cases move the clock by do not depend on the defaults.
const (
	linkTTL    = 15 * time.Minute
	sessionTTL = 30 * 24 * time.Hour
	linkLimit  = 5
	linkWindow = 15 * time.Minute
)

// farFuture is later than every mail the suite waits for is due.
var farFuture = start.AddDate(100, 0, 0)

// suite is a harness with the service over it, the clock of its units of
// work, and the helpers the cases share.
type suite struct {
	Harness
	clock  *testclock.Clock
	runner uow.Runner
	svc    *user.Service
	// projection applies events to the views under test.
	projection user.ViewsProjection
}

func newSuite(t *testing.T, h Harness) *suite {
	t.Helper()
	s := &suite{Harness: h, clock: testclock.New(start), projection: user.ViewsProjection{Views: h.Views, Keys: h.Keys}}
	s.runner = h.Runner(s.clock.Now)
	svc, err := user.NewService(user.Deps{
		Runner: s.runner, Events: h.Events, Outbox: h.Outbox, Views: h.Views, Keys: h.Keys,
	}, user.Policy{LinkTTL: linkTTL, SessionTTL: sessionTTL, LinkLimit: linkLimit, LinkWindow: linkWindow},
		"https://accounts.test")
	if err != nil {
		t.Fatal(err)
	}
	s.svc = svc
	return s
}

// do runs fn in a unit of work that must commit.
func (s *suite) do(t *testing.T, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	if err := s.runner.Do(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// apply applies events to the views in one committed unit of work, without
// appending them to the log.
func (s *suite) apply(t *testing.T, events ...eventstore.Event) {
	t.Helper()
	err := s.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		return s.projection.Apply(ctx, tx, events...)
	})
	if err != nil {
		t.Fatalf("Apply of %s: %v", types(events), err)
	}
}

// sweepAt sweeps up to limit rows of each table of the views as of now, in
// a committed unit of work, and checks how many rows it deleted.
func (s *suite) sweepAt(t *testing.T, now time.Time, limit int, want int64) {
	t.Helper()
	var n int64
	err := s.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var err error
		n, err = s.Views.Sweep(ctx, tx, now, limit)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("Sweep as of %s, %d a table, deleted %d rows, want %d", now.Format(time.RFC3339), limit, n, want)
	}
}

// log returns every event of the log, read as [projections.Rebuild] reads
// it, with [eventstore.Store.ReadCommitted].
func (s *suite) log(t *testing.T) []eventstore.Event {
	t.Helper()
	var all []eventstore.Event
	s.do(t, func(ctx context.Context, tx uow.Tx) error {
		all = nil
		var after eventstore.Position
		for {
			page, err := s.Events.ReadCommitted(ctx, tx, after, 100)
			if err != nil {
				return fmt.Errorf("read the log: %w", err)
			}
			if len(page) == 0 {
				return nil
			}
			all = append(all, page...)
			after = page[len(page)-1].Position
		}
	})
	return all
}

// opened returns events with the addresses in their data opened
// ([user.Address]), so that the suite can compare them with what it typed.
func (s *suite) opened(t *testing.T, events ...eventstore.Event) []eventstore.Event {
	t.Helper()
	out := make([]eventstore.Event, len(events))
	s.read(t, func(ctx context.Context, tx uow.Tx) error {
		for i, e := range events {
			var data map[string]any
			if err := json.Unmarshal(e.Data, &data); err != nil {
				return err
			}
			for _, field := range []string{"email", "new_email", "old_email"} {
				v, ok := data[field].(string)
				if !ok {
					continue
				}
				plain, _, err := user.Address(ctx, tx, s.Keys, e, v)
				if err != nil {
					return err
				}
				data[field] = plain
			}
			raw, err := json.Marshal(data)
			if err != nil {
				return err
			}
			out[i] = e
			out[i].Data = raw
		}
		return nil
	})
	return out
}

// last returns the last event of type typ in the log whose data, its
// addresses opened, match accepts, with its data.
func last[T any](t *testing.T, s *suite, typ string, match func(T) bool) (T, eventstore.Event) {
	t.Helper()
	events := s.opened(t, s.log(t)...)
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type != typ {
			continue
		}
		d, err := user.Decode[T](events[i])
		if err != nil {
			t.Fatal(err)
		}
		if match(d) {
			return d, events[i]
		}
	}
	t.Fatalf("the log holds no matching %s event", typ)
	var zero T
	return zero, eventstore.Event{}
}

// code is a one-time code a command mailed, with its hash and expiry as
// the log holds them.
type code struct {
	plain, hash string
	expiresAt   time.Time
}

// session is a session the service started, with its token's hash as the
// log holds it.
type session struct {
	user.Session
	hash string
}

// oneMail returns the one mail the service added since the last call, and
// checks its topic and recipient.
func (s *suite) oneMail(t *testing.T, topic, to string) mail.Link {
	t.Helper()
	sent := mailtest.Take(t, s.Outbox, farFuture)
	if len(sent) != 1 {
		t.Fatalf("the outbox got %d mails, want 1: %+v", len(sent), sent)
	}
	if sent[0].Topic != topic || sent[0].Link.To != to {
		t.Fatalf("mail on %s to %s, want %s to %s", sent[0].Topic, sent[0].Link.To, topic, to)
	}
	return sent[0].Link
}

// link asks the service for a sign-in link to email and returns its code.
func (s *suite) link(t *testing.T, email string) code {
	t.Helper()
	if err := s.svc.RequestSignInLink(t.Context(), email); err != nil {
		t.Fatalf("RequestSignInLink(%s): %v", email, err)
	}
	l := s.oneMail(t, mail.TopicLoginLink, email)
	d, _ := last(t, s, user.TypeSignInLinkRequested, func(d user.SignInLinkRequested) bool { return d.Email == email })
	if !d.ExpiresAt.Equal(l.ExpiresAt) {
		t.Fatalf("the last link to %s in the log expires at %s, the mail's at %s", email, d.ExpiresAt, l.ExpiresAt)
	}
	return code{plain: l.Code, hash: d.CodeHash, expiresAt: d.ExpiresAt}
}

// signIn asks for a link to email and signs in with it.
func (s *suite) signIn(t *testing.T, email string) session {
	t.Helper()
	ss, err := s.svc.SignIn(t.Context(), s.link(t, email).plain)
	if err != nil {
		t.Fatalf("SignIn of %s: %v", email, err)
	}
	d := s.started(t, ss.User.ID)
	if !d.ExpiresAt.Equal(ss.ExpiresAt) {
		t.Fatalf("the last session of %s in the log expires at %s, SignIn's at %s", email, d.ExpiresAt, ss.ExpiresAt)
	}
	return session{Session: ss, hash: d.TokenHash.Hex()}
}

// started returns the last session that the account id started, as the
// log holds it: the last [user.SessionStarted] of the account's stream.
func (s *suite) started(t *testing.T, id uuid.UUID) user.SessionStarted {
	t.Helper()
	events := s.log(t)
	for i := len(events) - 1; i >= 0; i-- {
		if e := events[i]; e.Type == user.TypeSessionStarted && e.Stream == userStream(id) {
			d, err := user.Decode[user.SessionStarted](e)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("the log holds no session started by %s", id)
	return user.SessionStarted{}
}

// signOut ends ss.
func (s *suite) signOut(t *testing.T, ss session) {
	t.Helper()
	if err := s.svc.SignOut(t.Context(), ss.Token); err != nil {
		t.Fatalf("SignOut of %s: %v", ss.User.Email, err)
	}
}

// changeCode asks for a change of the address of the session's user to
// email and returns the confirmation code.
func (s *suite) changeCode(t *testing.T, ss session, email string) code {
	t.Helper()
	if err := s.svc.RequestEmailChange(t.Context(), ss.Token, email); err != nil {
		t.Fatalf("RequestEmailChange(%s): %v", email, err)
	}
	l := s.oneMail(t, mail.TopicEmailChange, email)
	d, _ := last(t, s, user.TypeEmailChangeRequested, func(d user.EmailChangeRequested) bool {
		return d.UserID == ss.User.ID && d.NewEmail == email
	})
	return code{plain: l.Code, hash: d.CodeHash, expiresAt: d.ExpiresAt}
}

// confirm confirms an email change from the session from, which stays,
// and takes the notice it mails to the address the account leaves.
func (s *suite) confirm(t *testing.T, c code, from session) user.User {
	t.Helper()
	_, _, undo := s.confirmWithUndo(t, c, from.Token)
	u, ok := s.userByID(t, undo.user)
	if !ok {
		t.Fatalf("no user %s after the confirmation", undo.user)
	}
	return u
}

// undoCode is the code of a notice of a change of address, and whose
// change it undoes.
type undoCode struct {
	code
	user uuid.UUID
	// masked is the new address as the notice names it.
	masked string
}

// confirmWithUndo confirms an email change from the session token (""
// for none) and returns the address the account left, the one it moved
// to, and the code of the notice mailed to the one it left.
func (s *suite) confirmWithUndo(t *testing.T, c code, token string) (from, to string, undo undoCode) {
	t.Helper()
	from, to, err := s.svc.EmailChangeOf(t.Context(), c.plain)
	if err != nil {
		t.Fatalf("EmailChangeOf: %v", err)
	}
	u, err := s.svc.ConfirmEmailChange(t.Context(), c.plain, token)
	if err != nil {
		t.Fatalf("ConfirmEmailChange: %v", err)
	}
	l := s.oneMail(t, mail.TopicEmailChanged, from)
	d, _ := last(t, s, user.TypeEmailChanged, func(d user.EmailChanged) bool { return d.CodeHash == c.hash })
	if !d.UndoExpiresAt.Equal(l.ExpiresAt) || l.Account != u.ID.String() {
		t.Fatalf("the notice expires at %s for account %s, its change's code at %s for %s", l.ExpiresAt, l.Account, d.UndoExpiresAt, u.ID)
	}
	return from, to, undoCode{code: code{plain: l.Code, hash: d.UndoCodeHash, expiresAt: d.UndoExpiresAt}, user: u.ID, masked: l.NewAddress}
}

// read runs fn in a read-only unit of work, as the service runs its
// queries, and fails t on an error.
func (s *suite) read(t *testing.T, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	if err := s.runner.Read(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// The queries, each in a read-only unit of work of its own.

func (s *suite) userByEmail(t *testing.T, email string) (u user.User, found bool) {
	t.Helper()
	s.read(t, func(ctx context.Context, tx uow.Tx) (err error) {
		u, found, err = s.Views.UserByEmail(ctx, tx, email)
		return err
	})
	return u, found
}

func (s *suite) userByID(t *testing.T, id uuid.UUID) (u user.User, found bool) {
	t.Helper()
	s.read(t, func(ctx context.Context, tx uow.Tx) (err error) {
		u, found, err = s.Views.User(ctx, tx, id)
		return err
	})
	return u, found
}

func (s *suite) signInCode(t *testing.T, hash string) (email string, found bool) {
	t.Helper()
	s.read(t, func(ctx context.Context, tx uow.Tx) (err error) {
		email, found, err = s.Views.SignInCode(ctx, tx, hash)
		return err
	})
	return email, found
}

func (s *suite) emailChangeCode(t *testing.T, hash string) (id uuid.UUID, found bool) {
	t.Helper()
	s.read(t, func(ctx context.Context, tx uow.Tx) (err error) {
		id, found, err = s.Views.EmailChangeCode(ctx, tx, hash)
		return err
	})
	return id, found
}

func (s *suite) session(t *testing.T, hash string) (id uuid.UUID, expires time.Time, found bool) {
	t.Helper()
	s.read(t, func(ctx context.Context, tx uow.Tx) (err error) {
		var r user.SessionRow
		r, found, err = s.Views.Session(ctx, tx, hash)
		id, expires = r.UserID, r.ExpiresAt
		return err
	})
	return id, expires, found
}

// The checks of one answer each.

// wantUser checks that the views answer want both for its address and for
// its ID.
func (s *suite) wantUser(t *testing.T, want user.User) {
	t.Helper()
	if got, ok := s.userByEmail(t, want.Email); !ok || !sameUser(got, want) {
		t.Errorf("UserByEmail(%s) = %s, want %s", want.Email, showUser(got, ok), showUser(want, true))
	}
	if got, ok := s.userByID(t, want.ID); !ok || !sameUser(got, want) {
		t.Errorf("User(%s) = %s, want %s", want.ID, showUser(got, ok), showUser(want, true))
	}
}

func (s *suite) wantNoUserByEmail(t *testing.T, email string) {
	t.Helper()
	if got, ok := s.userByEmail(t, email); ok {
		t.Errorf("UserByEmail(%s) = %s, want none", email, showUser(got, ok))
	}
}

func (s *suite) wantNoUser(t *testing.T, id uuid.UUID) {
	t.Helper()
	if got, ok := s.userByID(t, id); ok {
		t.Errorf("User(%s) = %s, want none", id, showUser(got, ok))
	}
}

// wantSignInCode checks that the sign-in code with hash, described by
// what, answers email.
func (s *suite) wantSignInCode(t *testing.T, what, hash, email string) {
	t.Helper()
	if got, ok := s.signInCode(t, hash); !ok || got != email {
		t.Errorf("SignInCode of %s = %q (found %t), want %q", what, got, ok, email)
	}
}

func (s *suite) wantNoSignInCode(t *testing.T, what, hash string) {
	t.Helper()
	if got, ok := s.signInCode(t, hash); ok {
		t.Errorf("SignInCode of %s = %q, want none", what, got)
	}
}

func (s *suite) wantEmailChangeCode(t *testing.T, what, hash string, id uuid.UUID) {
	t.Helper()
	if got, ok := s.emailChangeCode(t, hash); !ok || got != id {
		t.Errorf("EmailChangeCode of %s = %s (found %t), want %s", what, got, ok, id)
	}
}

func (s *suite) wantNoEmailChangeCode(t *testing.T, what, hash string) {
	t.Helper()
	if got, ok := s.emailChangeCode(t, hash); ok {
		t.Errorf("EmailChangeCode of %s = %s, want none", what, got)
	}
}

func (s *suite) wantSession(t *testing.T, what, hash string, id uuid.UUID, expires time.Time) {
	t.Helper()
	if gotID, gotExp, ok := s.session(t, hash); !ok || gotID != id || !gotExp.Equal(expires) {
		t.Errorf("Session of %s = user %s expiring %s (found %t), want user %s expiring %s", what, gotID, showTime(gotExp), ok, id, showTime(expires))
	}
}

func (s *suite) wantNoSession(t *testing.T, what, hash string) {
	t.Helper()
	if gotID, gotExp, ok := s.session(t, hash); ok {
		t.Errorf("Session of %s = user %s expiring %s, want none", what, gotID, showTime(gotExp))
	}
}

func sameUser(a, b user.User) bool {
	return a.ID == b.ID && a.Email == b.Email && a.CreatedAt.Equal(b.CreatedAt)
}

func showUser(u user.User, found bool) string {
	if !found {
		return "none"
	}
	return fmt.Sprintf("{%s %s created %s}", u.ID, u.Email, showTime(u.CreatedAt))
}

// showSession writes what the events make of a session; its last use is
// no event's.
func showSession(r user.SessionRow, found bool) string {
	if !found {
		return "none"
	}
	return fmt.Sprintf("{%s %s started %s expires %s client %q}", r.UserID, r.ID, showTime(r.StartedAt), showTime(r.ExpiresAt), r.Client)
}

// showTime writes t in UTC, so that equal instants read the same whatever
// location a backend returns them in.
func showTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// keys are what the suite knows to ask the views: every address, user ID,
// code hash and token hash it met.
type keys struct {
	emails                                map[string]bool
	ids                                   map[uuid.UUID]bool
	signInCodes, changeCodes, tokenHashes map[string]bool
}

func newKeys() *keys {
	return &keys{
		emails: map[string]bool{}, ids: map[uuid.UUID]bool{},
		signInCodes: map[string]bool{}, changeCodes: map[string]bool{}, tokenHashes: map[string]bool{},
	}
}

// addEvents adds every key the events name, of every type of the domain,
// since the views follow only some of them; an event of a type it does
// not know fails the test.
func (k *keys) addEvents(t *testing.T, events ...eventstore.Event) {
	t.Helper()
	for _, e := range events {
		var err error
		switch e.Type {
		case user.TypeSignInLinkRequested:
			var d user.SignInLinkRequested
			d, err = user.Decode[user.SignInLinkRequested](e)
			k.emails[d.Email], k.signInCodes[d.CodeHash] = true, true
		case user.TypeSignInLinkUsed:
			var d user.SignInLinkUsed
			d, err = user.Decode[user.SignInLinkUsed](e)
			k.emails[d.Email], k.signInCodes[d.CodeHash], k.ids[d.UserID] = true, true, true
		case user.TypeRegistered:
			var d user.Registered
			d, err = user.Decode[user.Registered](e)
			k.ids[d.UserID], k.emails[d.Email] = true, true
		case user.TypeSessionStarted:
			var d user.SessionStarted
			d, err = user.Decode[user.SessionStarted](e)
			k.ids[userOf(t, e)], k.tokenHashes[d.TokenHash.Hex()] = true, true
		case user.TypeSessionEnded:
			var d user.SessionEnded
			d, err = user.Decode[user.SessionEnded](e)
			k.ids[userOf(t, e)], k.tokenHashes[d.TokenHash.Hex()] = true, true
		case user.TypeEmailChangeRequested:
			var d user.EmailChangeRequested
			d, err = user.Decode[user.EmailChangeRequested](e)
			k.ids[d.UserID], k.emails[d.NewEmail], k.changeCodes[d.CodeHash] = true, true, true
		case user.TypeEmailChanged:
			var d user.EmailChanged
			d, err = user.Decode[user.EmailChanged](e)
			k.ids[d.UserID], k.emails[d.OldEmail], k.emails[d.NewEmail], k.changeCodes[d.CodeHash] = true, true, true, true
		case user.TypeEmailChangeUndone:
			var d user.EmailChangeUndone
			d, err = user.Decode[user.EmailChangeUndone](e)
			k.ids[d.UserID], k.emails[d.Email] = true, true
		case user.TypeErased:
			var d user.Erased
			d, err = user.Decode[user.Erased](e)
			k.ids[d.UserID] = true
		case user.TypeSignInForgotten:
			// It names no address, code or account.
		default:
			t.Fatalf("the suite knows no keys of %s events: add them here", e.Type)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// answers asks the views about every key in one read-only unit of work and
// returns each answer written out, by query.
func (s *suite) answers(t *testing.T, k *keys) map[string]string {
	t.Helper()
	out := map[string]string{}
	s.read(t, func(ctx context.Context, tx uow.Tx) error {
		clear(out)
		for email := range k.emails {
			u, ok, err := s.Views.UserByEmail(ctx, tx, email)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("UserByEmail(%s)", email)] = showUser(u, ok)
		}
		for id := range k.ids {
			u, ok, err := s.Views.User(ctx, tx, id)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("User(%s)", id)] = showUser(u, ok)
		}
		for hash := range k.signInCodes {
			email, ok, err := s.Views.SignInCode(ctx, tx, hash)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("SignInCode(%s)", hash)] = showFound(email, ok)
		}
		for hash := range k.changeCodes {
			id, ok, err := s.Views.EmailChangeCode(ctx, tx, hash)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("EmailChangeCode(%s)", hash)] = showFound(id.String(), ok)
		}
		for hash := range k.tokenHashes {
			r, ok, err := s.Views.Session(ctx, tx, hash)
			if err != nil {
				return err
			}
			out[fmt.Sprintf("Session(%s)", hash)] = showSession(r, ok)
		}
		return nil
	})
	return out
}

func showFound(v string, found bool) string {
	if !found {
		return "none"
	}
	return v
}

// diffAnswers lists the queries whose answers differ, one line each, in
// the order of the queries.
func diffAnswers(want, got map[string]string) []string {
	var queries []string
	for q := range want {
		queries = append(queries, q)
	}
	for q := range got {
		if _, ok := want[q]; !ok {
			queries = append(queries, q)
		}
	}
	slices.Sort(queries)
	var diff []string
	for _, q := range queries {
		if w, g := want[q], got[q]; w != g {
			diff = append(diff, fmt.Sprintf("%s = %s, want %s", q, g, w))
		}
	}
	return diff
}

// countFound counts the answers of queries named with prefix that found
// something, and those that did not.
func countFound(answers map[string]string, prefix string) (found, none int) {
	for q, a := range answers {
		if !strings.HasPrefix(q, prefix+"(") {
			continue
		}
		if a == "none" {
			none++
		} else {
			found++
		}
	}
	return found, none
}

// Hand-made events. Each is as the log would hold it: in its stream,
// recorded at the time given. The views ignore Version and Position.

func made(t *testing.T, stream, typ string, data any, at time.Time) eventstore.Event {
	t.Helper()
	e, err := eventstore.NewEvent(typ, data, eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	e.SchemaVersion = user.Events().Version(typ)
	e.Stream, e.Version, e.RecordedAt = stream, 1, at
	return e
}

// The events below are made by hand, with their addresses in plain text
// as the events written before addresses were sealed have them, which the
// views read as they are; so do the streams they name.

func signInStream(email string) string { return "signin-" + email }

func userStream(id uuid.UUID) string { return "user-" + id.String() }

// userOf returns the account whose stream holds e ([user.UserOf]).
func userOf(t *testing.T, e eventstore.Event) uuid.UUID {
	t.Helper()
	id, err := user.UserOf(e)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func linkRequested(t *testing.T, email, hash string, at, expires time.Time) eventstore.Event {
	t.Helper()
	return made(t, signInStream(email), user.TypeSignInLinkRequested,
		user.SignInLinkRequested{Email: email, CodeHash: hash, RequestedAt: at, ExpiresAt: expires}, at)
}

func registered(t *testing.T, id uuid.UUID, email string, at time.Time) eventstore.Event {
	t.Helper()
	return made(t, userStream(id), user.TypeRegistered, user.Registered{UserID: id, Email: email}, at)
}

func sessionStarted(t *testing.T, id uuid.UUID, hash string, at, expires time.Time) eventstore.Event {
	t.Helper()
	return made(t, userStream(id), user.TypeSessionStarted,
		user.SessionStarted{TokenHash: tokenHash(t, hash), ExpiresAt: expires}, at)
}

func sessionEnded(t *testing.T, id uuid.UUID, hash string, at time.Time) eventstore.Event {
	t.Helper()
	return made(t, userStream(id), user.TypeSessionEnded, user.SessionEnded{TokenHash: tokenHash(t, hash)}, at)
}

// tokenHash returns the token hash whose hex form, as the views key a
// session by, is hash.
func tokenHash(t *testing.T, hash string) user.TokenHash {
	t.Helper()
	h, err := user.ParseTokenHash(hash)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func linkUsed(t *testing.T, email, hash string, id uuid.UUID, at time.Time) eventstore.Event {
	t.Helper()
	return made(t, signInStream(email), user.TypeSignInLinkUsed,
		user.SignInLinkUsed{Email: email, CodeHash: hash, UserID: id}, at)
}

func changeRequested(t *testing.T, id uuid.UUID, email, hash string, at, expires time.Time) eventstore.Event {
	t.Helper()
	return made(t, userStream(id), user.TypeEmailChangeRequested,
		user.EmailChangeRequested{UserID: id, NewEmail: email, CodeHash: hash, ExpiresAt: expires}, at)
}

func emailChanged(t *testing.T, id uuid.UUID, oldEmail, newEmail, hash string, at time.Time) eventstore.Event {
	t.Helper()
	return made(t, userStream(id), user.TypeEmailChanged,
		user.EmailChanged{UserID: id, OldEmail: oldEmail, NewEmail: newEmail, CodeHash: hash}, at)
}

// fakeHash returns a hash of the form the domain stores, of label, for the
// codes and tokens of hand-made events.
func fakeHash(label string) string {
	sum := sha256.Sum256([]byte("viewstest " + label))
	return hex.EncodeToString(sum[:])
}

func newID(t *testing.T) uuid.UUID {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func types(events []eventstore.Event) string {
	names := make([]string, len(events))
	for i, e := range events {
		names[i] = e.Type
	}
	return "[" + strings.Join(names, " ") + "]"
}
