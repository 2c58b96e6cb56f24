package user_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
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

const (
	linkTTL    = 15 * time.Minute
	sessionTTL = 30 * 24 * time.Hour
)

// bundle is one test's service on its own PostgreSQL schema, with a clock
// the test moves by hand.
type bundle struct {
	db   *postgres.DB
	svc  *user.Service
	keys *keyring.Keyring
	// clock is the runner's; goroutines of the concurrency tests read it.
	clock *testclock.Clock
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupPolicy(t, user.Policy{})
}

func setupPolicy(t *testing.T, p user.Policy, opts ...user.Option) *bundle {
	t.Helper()
	b := &bundle{db: pgtest.New(t), clock: testclock.New(start), keys: keyringtest.New(t, postgres.DataKeys{})}
	runner := b.db.Runner(b.clock.Now)
	svc, err := user.NewService(user.Deps{
		Runner: runner,
		Events: b.db.Events(),
		Outbox: b.db.Outbox(),
		Views:  postgres.UserViews{},
		Keys:   b.keys,
	}, p, baseURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b.svc = svc
	return b
}

// mails returns the mails added to the outbox since the last call, oldest
// first, and removes them from the outbox as a relay would.
func (b *bundle) mails(t *testing.T) []mailtest.Sent {
	t.Helper()
	return mailtest.Take(t, b.db.Outbox(), b.clock.Now().Add(100*365*24*time.Hour))
}

// oneMail returns the one mail added since the last call and checks its
// topic, recipient, link and expiry.
func (b *bundle) oneMail(t *testing.T, topic, to, path string) mailtest.Sent {
	t.Helper()
	ms := b.mails(t)
	if len(ms) != 1 {
		t.Fatalf("outbox got %d messages, want 1: %+v", len(ms), ms)
	}
	m := ms[0]
	if m.ID == uuid.Nil {
		t.Errorf("outbox message has no ID")
	}
	if m.Topic != topic {
		t.Errorf("topic = %q, want %q", m.Topic, topic)
	}
	if m.Link.To != to {
		t.Errorf("mail to %q, want %q", m.Link.To, to)
	}
	if want := baseURL + path + "?code=" + m.Link.Code; m.Link.URL != want {
		t.Errorf("URL = %q, want %q", m.Link.URL, want)
	}
	if want := b.clock.Now().Add(linkTTL); !m.Link.ExpiresAt.Equal(want) {
		t.Errorf("link expires at %s, want now + 15m = %s", m.Link.ExpiresAt, want)
	}
	// At least 128 random bits, as base32 letters of 5 bits each.
	if len(m.Link.Code)*5 < 128 {
		t.Errorf("code %q has fewer than 128 bits", m.Link.Code)
	}
	return m
}

// link asks for a sign-in link to address and returns its code.
func (b *bundle) link(t *testing.T, address, normalized string) string {
	t.Helper()
	if err := b.svc.RequestSignInLink(t.Context(), address); err != nil {
		t.Fatalf("RequestSignInLink(%q): %v", address, err)
	}
	return b.oneMail(t, mail.TopicLoginLink, normalized, "/sign-in").Link.Code
}

// signIn asks for a link to a normalized address and signs in with it.
func (b *bundle) signIn(t *testing.T, email string) user.Session {
	t.Helper()
	s, err := b.svc.SignIn(t.Context(), b.link(t, email, email))
	if err != nil {
		t.Fatalf("SignIn for %s: %v", email, err)
	}
	return s
}

// confirm confirms a change of address from the session token and takes
// the notice it mails to the address the account leaves.
func (b *bundle) confirm(t *testing.T, code, token string) user.User {
	t.Helper()
	u, err := b.svc.ConfirmEmailChange(t.Context(), code, token)
	if err != nil {
		t.Fatalf("ConfirmEmailChange: %v", err)
	}
	if ms := b.mails(t); len(ms) != 1 || ms[0].Topic != mail.TopicEmailChanged {
		t.Fatalf("the confirmation mailed %+v, want one notice on %s", ms, mail.TopicEmailChanged)
	}
	return u
}

// changeCode asks for an email change and returns the confirmation code.
func (b *bundle) changeCode(t *testing.T, token, newEmail string) string {
	t.Helper()
	if err := b.svc.RequestEmailChange(t.Context(), token, newEmail); err != nil {
		t.Fatalf("RequestEmailChange(%q): %v", newEmail, err)
	}
	return b.oneMail(t, mail.TopicEmailChange, newEmail, "/confirm-email").Link.Code
}

// count returns the result of a count query.
func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.Pool().QueryRow(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// addresses returns the field of the data of each event of type typ, in
// the order of the log, opened ([user.Address]).
func (b *bundle) addresses(t *testing.T, typ, field string) []string {
	t.Helper()
	rows, err := b.db.Pool().Query(t.Context(), `SELECT s.name, data::text, coalesce(data->>$2, '') FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE type = $1 ORDER BY position`, typ, field)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		event eventstore.Event
		value string
	}
	sealed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		x := row{event: eventstore.Event{Type: typ}}
		var data string
		err := r.Scan(&x.event.Stream, &data, &x.value)
		x.event.Data = []byte(data)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	err = b.db.Runner(nil).Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		for _, x := range sealed {
			plain, _, err := user.Address(ctx, tx, b.keys, x.event, x.value)
			if err != nil {
				return err
			}
			out = append(out, plain)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// countOf returns how many of values are v.
func countOf(values []string, v string) int {
	n := 0
	for _, x := range values {
		if x == v {
			n++
		}
	}
	return n
}

func (b *bundle) events(t *testing.T) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM events`)
}

// unchanged checks that a refused command added no event and no outbox
// message: events is the count of events before it.
func (b *bundle) unchanged(t *testing.T, what string, events int) {
	t.Helper()
	if n := b.events(t); n != events {
		t.Errorf("%s: events went from %d to %d, want no change", what, events, n)
	}
	if n := b.count(t, `SELECT count(*) FROM outbox_messages`); n != 0 {
		t.Errorf("%s: outbox holds %d messages, want none", what, n)
	}
}

func (b *bundle) me(t *testing.T, token string) user.User {
	t.Helper()
	u, err := b.svc.Me(t.Context(), token)
	if err != nil {
		t.Fatalf("Me: %v", err)
	}
	return u
}

func sameUser(t *testing.T, what string, got, want user.User) {
	t.Helper()
	if got.ID != want.ID || got.Email != want.Email || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

// NewService refuses deps without a keyring: every address in the events
// is sealed with it.
func TestNewServiceRefusesNoKeyring(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	_, err := user.NewService(user.Deps{
		Runner: db.Runner(nil), Events: db.Events(), Outbox: db.Outbox(), Views: postgres.UserViews{},
	}, user.Policy{}, baseURL)
	if err == nil {
		t.Fatal("NewService without a keyring: no error")
	}
}

func TestSignIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	if err := b.svc.RequestSignInLink(ctx, "  Ada@Example.COM "); err != nil {
		t.Fatal(err)
	}
	m := b.oneMail(t, mail.TopicLoginLink, "ada@example.com", "/sign-in")
	if n := b.count(t, `SELECT count(*) FROM users`); n != 0 {
		t.Errorf("asking for a link created %d users, want none before the first sign-in", n)
	}

	b.clock.Advance(time.Minute)
	s, err := b.svc.SignIn(ctx, m.Link.Code)
	if err != nil {
		t.Fatal(err)
	}
	if s.Token == "" || s.Token == m.Link.Code {
		t.Errorf("session token %q, want a fresh secret", s.Token)
	}
	if want := b.clock.Now().Add(sessionTTL); !s.ExpiresAt.Equal(want) {
		t.Errorf("session expires at %s, want now + 30 days = %s", s.ExpiresAt, want)
	}
	if s.User.ID == uuid.Nil || s.User.Email != "ada@example.com" || !s.User.CreatedAt.Equal(b.clock.Now()) {
		t.Errorf("session user = %+v, want a new user ada@example.com created now (%s)", s.User, b.clock.Now())
	}
	sameUser(t, "Me", b.me(t, s.Token), s.User)

	// Only hashes are stored: neither the code nor the token appears in
	// the events or the projections.
	for _, secret := range []string{m.Link.Code, s.Token} {
		n := b.count(t, `SELECT count(*) FROM events WHERE data::text LIKE '%' || $1 || '%'`, secret)
		n += b.count(t, `SELECT count(*) FROM sessions WHERE token_hash = $1`, secret)
		n += b.count(t, `SELECT count(*) FROM signin_codes WHERE code_hash = $1`, secret)
		if n != 0 {
			t.Errorf("a plain secret is stored in %d places", n)
		}
	}

	// The code works once.
	if _, err := b.svc.SignIn(ctx, m.Link.Code); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("second SignIn with one code: %v, want ErrInvalidCode", err)
	}

	// A later sign-in of the address reaches the same user.
	b.clock.Advance(time.Hour)
	again, err := b.svc.SignIn(ctx, b.link(t, "ada@example.com", "ada@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	sameUser(t, "second sign-in's user", again.User, s.User)
	if again.Token == s.Token {
		t.Errorf("two sign-ins share one token")
	}

	// The code is accepted in upper case.
	upper, err := b.svc.SignIn(ctx, strings.ToUpper(b.link(t, "ADA@example.com", "ada@example.com")))
	if err != nil {
		t.Fatalf("SignIn with the code in upper case: %v", err)
	}
	sameUser(t, "upper-case sign-in's user", upper.User, s.User)

	if n := b.count(t, `SELECT count(*) FROM users`); n != 1 {
		t.Errorf("users table holds %d rows, want 1", n)
	}
	if n := b.count(t, `SELECT count(*) FROM sessions WHERE user_id = $1`, s.User.ID); n != 3 {
		t.Errorf("sessions table holds %d sessions of the user, want 3", n)
	}
}

func TestSignInRefusesBadCodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	code := b.link(t, "ada@example.com", "ada@example.com")
	events := b.events(t)

	bad := map[string]string{
		"empty":                   "",
		"short":                   "abc",
		"one letter too long":     code + "a",
		"one letter too short":    code[1:],
		"not base32":              "1" + code[1:],
		"punctuation":             "!" + code[1:],
		"unknown but well formed": strings.Repeat("a", len(code)),
		"an upper-case unknown":   strings.Repeat("B", len(code)),
		"the link's URL":          baseURL + "/sign-in?code=" + code,
	}
	for name, c := range bad {
		if _, err := b.svc.SignIn(ctx, c); !errors.Is(err, user.ErrInvalidCode) {
			t.Errorf("SignIn with %s code %q: %v, want ErrInvalidCode", name, c, err)
		}
	}
	b.unchanged(t, "refused sign-ins", events)

	// The real code still works after all that.
	if _, err := b.svc.SignIn(ctx, code); err != nil {
		t.Errorf("SignIn with the real code after refusals: %v", err)
	}
}

func TestSignInCodeExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	early := b.link(t, "ada@example.com", "ada@example.com")
	late := b.link(t, "ada@example.com", "ada@example.com")

	b.clock.Set(start.Add(linkTTL - time.Microsecond))
	if _, err := b.svc.SignIn(ctx, early); err != nil {
		t.Fatalf("SignIn a microsecond before the code expires: %v", err)
	}

	b.clock.Set(start.Add(linkTTL))
	events := b.events(t)
	if _, err := b.svc.SignIn(ctx, late); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("SignIn at the code's expiry: %v, want ErrInvalidCode", err)
	}
	b.unchanged(t, "expired sign-in", events)
	if n := b.count(t, `SELECT count(*) FROM sessions`); n != 1 {
		t.Errorf("sessions table holds %d rows, want 1", n)
	}
}

func TestRequestSignInLinkRefusesBadAddresses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	bad := []string{
		"",
		"   ",
		"not-an-email",
		"Ada <ada@example.com>",
		"<ada@example.com>",
		"ada@example.com, bob@example.com",
		"a@b",
		"ada@example.",
		"ada@.example.com",
		"ada@example..com",
		"ada@[127.0.0.1]",
		"ada@exa mple.com",
		"ada (Ada) @example.com",
		strings.Repeat("a", 65) + "@example.com",
		"ada@" + strings.Repeat("e", 250) + ".com",
		strings.Repeat("a", 64) + "@" + strings.Repeat("e", 190) + ".com",
	}
	for _, address := range bad {
		if err := b.svc.RequestSignInLink(ctx, address); !errors.Is(err, user.ErrBadEmail) {
			t.Errorf("RequestSignInLink(%q): %v, want ErrBadEmail", address, err)
		}
	}
	b.unchanged(t, "refused addresses", 0)
	if ms := b.mails(t); len(ms) != 0 {
		t.Errorf("refused addresses were sent %d mails", len(ms))
	}

	// The longest addresses allowed are fine.
	for _, address := range []string{
		strings.Repeat("a", 64) + "@example.com",
		// 254 characters, in labels of at most 63.
		strings.Repeat("a", 64) + "@" + strings.Repeat("e", 61) + "." + strings.Repeat("f", 61) + "." + strings.Repeat("g", 61) + ".com",
	} {
		if err := b.svc.RequestSignInLink(ctx, address); err != nil {
			t.Errorf("RequestSignInLink of a %d-character address: %v", len(address), err)
		}
	}
}

func TestSignInLinkRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const address = "ada@example.com"

	for i := range 5 {
		b.clock.Set(start.Add(time.Duration(i) * time.Minute))
		if err := b.svc.RequestSignInLink(ctx, address); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	if ms := b.mails(t); len(ms) != 5 {
		t.Fatalf("5 requests added %d mails", len(ms))
	}

	limited := func(what string, wait time.Duration) {
		t.Helper()
		events := b.events(t)
		err := b.svc.RequestSignInLink(ctx, address)
		if !errors.Is(err, user.ErrTooManyRequests) {
			t.Fatalf("%s: %v, want ErrTooManyRequests", what, err)
		}
		var tooMany *user.TooManyRequestsError
		if !errors.As(err, &tooMany) {
			t.Fatalf("%s: %T is not a *user.TooManyRequestsError", what, err)
		}
		if tooMany.RetryAfter != wait {
			t.Errorf("%s: RetryAfter = %s, want %s", what, tooMany.RetryAfter, wait)
		}
		b.unchanged(t, what, events)
	}

	// The first request, at start, leaves the window at start+15m.
	b.clock.Set(start.Add(5 * time.Minute))
	limited("6th request", 10*time.Minute)
	b.clock.Set(start.Add(15*time.Minute - time.Microsecond))
	limited("request a microsecond before the window moves", time.Microsecond)
	b.clock.Set(start.Add(5 * time.Minute))
	err := b.svc.RequestSignInLink(ctx, "  ADA@example.COM")
	if !errors.Is(err, user.ErrTooManyRequests) {
		t.Errorf("the same address written otherwise: %v, want ErrTooManyRequests", err)
	}

	// Once the first request has left the window, one more is allowed.
	b.clock.Set(start.Add(15 * time.Minute))
	if err := b.svc.RequestSignInLink(ctx, address); err != nil {
		t.Fatalf("request once the window moved: %v", err)
	}
	b.oneMail(t, mail.TopicLoginLink, address, "/sign-in")
	// Now the requests at 1m..4m and 15m fill the window again, and the one
	// at 1m leaves it first.
	limited("request after the window filled again", time.Minute)

	// Another address is not limited.
	if err := b.svc.RequestSignInLink(ctx, "bob@example.com"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	b.oneMail(t, mail.TopicLoginLink, "bob@example.com", "/sign-in")
}

func TestEmailChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")

	b.clock.Advance(time.Minute)
	if err := b.svc.RequestEmailChange(ctx, ada.Token, "  New@Example.com "); err != nil {
		t.Fatal(err)
	}
	code := b.oneMail(t, mail.TopicEmailChange, "new@example.com", "/confirm-email").Link.Code
	sameUser(t, "Me before confirmation", b.me(t, ada.Token), ada.User)

	b.clock.Advance(time.Minute)
	u := b.confirm(t, code, ada.Token)
	moved := user.User{ID: ada.User.ID, Email: "new@example.com", CreatedAt: ada.User.CreatedAt}
	sameUser(t, "ConfirmEmailChange", u, moved)
	sameUser(t, "Me after confirmation", b.me(t, ada.Token), moved)
	if n := b.count(t, `SELECT count(*) FROM email_change_codes`); n != 0 {
		t.Errorf("email_change_codes holds %d codes after the only one was used", n)
	}

	// The code works once.
	events := b.events(t)
	if _, err := b.svc.ConfirmEmailChange(ctx, code, ""); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("second ConfirmEmailChange: %v, want ErrInvalidCode", err)
	}
	if _, err := b.svc.ConfirmEmailChange(ctx, strings.Repeat("a", len(code)), ""); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("ConfirmEmailChange with an unknown code: %v, want ErrInvalidCode", err)
	}
	if _, err := b.svc.ConfirmEmailChange(ctx, "nonsense", ""); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("ConfirmEmailChange with a malformed code: %v, want ErrInvalidCode", err)
	}
	b.unchanged(t, "refused confirmations", events)

	// The new address signs in to the same account.
	viaNew := b.signIn(t, "new@example.com")
	sameUser(t, "sign-in with the new address", viaNew.User, moved)

	// The old address is free: its next sign-in creates a new account.
	old := b.signIn(t, "ada@example.com")
	if old.User.ID == ada.User.ID {
		t.Errorf("sign-in with the old address reached the moved account %s", ada.User.ID)
	}
	if old.User.Email != "ada@example.com" || !old.User.CreatedAt.Equal(b.clock.Now()) {
		t.Errorf("sign-in with the old address: %+v, want a new user created now", old.User)
	}
	if n := b.count(t, `SELECT count(*) FROM users`); n != 2 {
		t.Errorf("users table holds %d rows, want 2", n)
	}
}

// A confirmation voids the codes of the changes asked for before it, so a
// link mailed to a mistyped address, corrected since, cannot move the
// account later; a change asked for after it works.
func TestAConfirmationVoidsTheCodesAskedBeforeIt(t *testing.T) {
	t.Parallel()
	refused := func(t *testing.T, b *bundle, what, code string) {
		t.Helper()
		events := b.events(t)
		if _, _, err := b.svc.EmailChangeOf(t.Context(), code); !errors.Is(err, user.ErrInvalidCode) {
			t.Errorf("EmailChangeOf %s: %v, want ErrInvalidCode", what, err)
		}
		if _, err := b.svc.ConfirmEmailChange(t.Context(), code, ""); !errors.Is(err, user.ErrInvalidCode) {
			t.Errorf("ConfirmEmailChange of %s: %v, want ErrInvalidCode", what, err)
		}
		b.unchanged(t, what, events)
	}
	t.Run("AskedBeforeTheConfirmedOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ada := b.signIn(t, "ada@example.com")
		mistyped := b.changeCode(t, ada.Token, "ada@exmaple.com")
		corrected := b.changeCode(t, ada.Token, "ada@example.org")
		b.confirm(t, corrected, ada.Token)
		refused(t, b, "the mistyped address's code", mistyped)
		if got := b.me(t, ada.Token).Email; got != "ada@example.org" {
			t.Errorf("Me shows %q, want ada@example.org", got)
		}
		later := b.changeCode(t, ada.Token, "ada@example.net")
		if u, err := b.svc.ConfirmEmailChange(t.Context(), later, ada.Token); err != nil || u.Email != "ada@example.net" {
			t.Errorf("ConfirmEmailChange of a code asked for after the change: %+v, %v; want ada@example.net", u, err)
		}
	})
	t.Run("AskedAfterTheConfirmedOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ada := b.signIn(t, "ada@example.com")
		first := b.changeCode(t, ada.Token, "one@example.com")
		second := b.changeCode(t, ada.Token, "two@example.com")
		b.confirm(t, first, ada.Token)
		refused(t, b, "the code asked for after the confirmed one", second)
	})
	// The confirmation's clock was behind, so its event is recorded before
	// the requests it follows in the stream. At the end of the voided
	// code's life the window of recent events holds the request and not
	// the confirmation: the code is still refused.
	t.Run("WhenTheConfirmationsClockWasBehind", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ada := b.signIn(t, "ada@example.com")
		asked := start.Add(time.Hour)
		b.clock.Set(asked)
		mistyped := b.changeCode(t, ada.Token, "ada@exmaple.com")
		corrected := b.changeCode(t, ada.Token, "ada@example.org")
		b.clock.Set(asked.Add(-time.Second))
		b.confirm(t, corrected, ada.Token)
		b.clock.Set(asked.Add(linkTTL - time.Microsecond))
		refused(t, b, "the mistyped address's code", mistyped)
	})
}

func TestRequestEmailChangeRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	bob := b.signIn(t, "bob@example.com")
	events := b.events(t)

	if err := b.svc.RequestEmailChange(ctx, ada.Token, " ADA@example.com"); !errors.Is(err, user.ErrEmailTaken) {
		t.Errorf("change to one's own address: %v, want ErrEmailTaken", err)
	}
	for _, address := range []string{"", "not-an-email", "Ada <new@example.com>", "a@b"} {
		if err := b.svc.RequestEmailChange(ctx, ada.Token, address); !errors.Is(err, user.ErrBadEmail) {
			t.Errorf("change to %q: %v, want ErrBadEmail", address, err)
		}
	}
	unknown := strings.Repeat("a", len(ada.Token))
	for _, token := range []string{"", "nonsense", unknown, bob.Token + "a"} {
		if err := b.svc.RequestEmailChange(ctx, token, "new@example.com"); !errors.Is(err, user.ErrUnauthenticated) {
			t.Errorf("change with token %q: %v, want ErrUnauthenticated", token, err)
		}
	}
	b.unchanged(t, "refused email changes", events)
	sameUser(t, "Me", b.me(t, ada.Token), ada.User)
}

// TestRequestEmailChangeToATakenAddress: asking to move to an address that
// has an account is recorded and answered as any request, and counts
// against the limit alike, so that the answer tells nothing; the mail to
// that address says it is taken and carries no link.
func TestRequestEmailChangeToATakenAddress(t *testing.T) {
	t.Parallel()
	b := setupPolicy(t, user.Policy{LinkLimit: 2})
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	b.signIn(t, "bob@example.com")

	if err := b.svc.RequestEmailChange(ctx, ada.Token, " BOB@example.com"); err != nil {
		t.Fatalf("change to another account's address: %v, want it taken as any request", err)
	}
	ms := b.mails(t)
	if len(ms) != 1 || ms[0].Topic != mail.TopicEmailTaken || ms[0].Link.To != "bob@example.com" ||
		ms[0].Link.URL != "" || ms[0].Link.Code != "" || !ms[0].Link.ExpiresAt.Equal(b.clock.Now().Add(linkTTL)) {
		t.Fatalf("mails %+v, want one on %s to bob@example.com with no link", ms, mail.TopicEmailTaken)
	}
	b.changeCode(t, ada.Token, "ada.new@example.com")
	// The taken request counted: the limit of 2 is spent.
	var tooMany *user.TooManyRequestsError
	for _, address := range []string{"bob@example.com", "cy@example.com"} {
		if err := b.svc.RequestEmailChange(ctx, ada.Token, address); !errors.As(err, &tooMany) {
			t.Errorf("third change, to %s: %v, want TooManyRequestsError", address, err)
		}
	}
	sameUser(t, "Me", b.me(t, ada.Token), ada.User)
}

func TestEmailChangeTakenMeanwhile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	bob := b.signIn(t, "bob@example.com")
	adaCode := b.changeCode(t, ada.Token, "new@example.com")
	bobCode := b.changeCode(t, bob.Token, "new@example.com")

	b.confirm(t, adaCode, ada.Token)
	events := b.events(t)
	if _, err := b.svc.ConfirmEmailChange(ctx, bobCode, bob.Token); !errors.Is(err, user.ErrEmailTaken) {
		t.Errorf("confirming an address taken meanwhile: %v, want ErrEmailTaken", err)
	}
	b.unchanged(t, "refused confirmation", events)
	sameUser(t, "Me of the loser", b.me(t, bob.Token), bob.User)
	if n := b.count(t, `SELECT count(*) FROM users WHERE email = 'new@example.com' AND id = $1`, ada.User.ID); n != 1 {
		t.Errorf("the winner does not hold the address")
	}

	// A change to an address that a sign-in took meanwhile is refused too.
	bobCode = b.changeCode(t, bob.Token, "cy@example.com")
	b.signIn(t, "cy@example.com")
	if _, err := b.svc.ConfirmEmailChange(ctx, bobCode, ""); !errors.Is(err, user.ErrEmailTaken) {
		t.Errorf("confirming an address a new account took meanwhile: %v, want ErrEmailTaken", err)
	}
	sameUser(t, "Me of the loser", b.me(t, bob.Token), bob.User)
}

func TestEmailChangeCodeExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	b.clock.Set(start.Add(time.Hour))
	early := b.changeCode(t, ada.Token, "early@example.com")
	late := b.changeCode(t, ada.Token, "late@example.com")

	b.clock.Set(start.Add(time.Hour + linkTTL))
	events := b.events(t)
	if _, err := b.svc.ConfirmEmailChange(ctx, late, ""); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("ConfirmEmailChange at the code's expiry: %v, want ErrInvalidCode", err)
	}
	b.unchanged(t, "expired confirmation", events)
	sameUser(t, "Me", b.me(t, ada.Token), ada.User)

	b.clock.Set(start.Add(time.Hour + linkTTL - time.Microsecond))
	if _, err := b.svc.ConfirmEmailChange(ctx, early, ada.Token); err != nil {
		t.Errorf("ConfirmEmailChange a microsecond before expiry: %v", err)
	}
	if got := b.me(t, ada.Token).Email; got != "early@example.com" {
		t.Errorf("Me shows %q, want early@example.com", got)
	}
}

func TestSignOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	first := b.signIn(t, "ada@example.com")
	second := b.signIn(t, "ada@example.com")

	if err := b.svc.SignOut(ctx, first.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Me(ctx, first.Token); !errors.Is(err, user.ErrUnauthenticated) {
		t.Errorf("Me after SignOut: %v, want ErrUnauthenticated", err)
	}
	events := b.events(t)
	if err := b.svc.SignOut(ctx, first.Token); !errors.Is(err, user.ErrUnauthenticated) {
		t.Errorf("second SignOut: %v, want ErrUnauthenticated", err)
	}
	for _, token := range []string{"", "nonsense", strings.Repeat("a", len(first.Token))} {
		if err := b.svc.SignOut(ctx, token); !errors.Is(err, user.ErrUnauthenticated) {
			t.Errorf("SignOut(%q): %v, want ErrUnauthenticated", token, err)
		}
		if _, err := b.svc.Me(ctx, token); !errors.Is(err, user.ErrUnauthenticated) {
			t.Errorf("Me(%q): %v, want ErrUnauthenticated", token, err)
		}
	}
	b.unchanged(t, "refused sign-outs", events)
	sameUser(t, "Me of the other session", b.me(t, second.Token), first.User)
	if n := b.count(t, `SELECT count(*) FROM sessions`); n != 1 {
		t.Errorf("sessions table holds %d rows, want 1", n)
	}

	// Sessions expire after 30 days.
	b.clock.Set(start.Add(sessionTTL - time.Microsecond))
	sameUser(t, "Me just before expiry", b.me(t, second.Token), first.User)
	b.clock.Set(start.Add(sessionTTL))
	if _, err := b.svc.Me(ctx, second.Token); !errors.Is(err, user.ErrUnauthenticated) {
		t.Errorf("Me of an expired session: %v, want ErrUnauthenticated", err)
	}
	if err := b.svc.SignOut(ctx, second.Token); !errors.Is(err, user.ErrUnauthenticated) {
		t.Errorf("SignOut of an expired session: %v, want ErrUnauthenticated", err)
	}
	if err := b.svc.RequestEmailChange(ctx, second.Token, "new@example.com"); !errors.Is(err, user.ErrUnauthenticated) {
		t.Errorf("RequestEmailChange with an expired session: %v, want ErrUnauthenticated", err)
	}
}

// together runs fn(0..n-1) in n goroutines released at one moment, and
// returns their errors by index.
func together(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	release := make(chan struct{})
	var ready, done sync.WaitGroup
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-release
			errs[i] = fn(i)
		}()
	}
	ready.Wait()
	close(release)
	done.Wait()
	return errs
}

func TestConcurrentFirstSignInsCreateOneUser(t *testing.T) {
	t.Parallel()
	const n = 50
	b := setupPolicy(t, user.Policy{LinkLimit: n})
	ctx := t.Context()
	const address = "crowd@example.com"
	for range n {
		if err := b.svc.RequestSignInLink(ctx, address); err != nil {
			t.Fatal(err)
		}
	}
	ms := b.mails(t)
	if len(ms) != n {
		t.Fatalf("%d requests added %d mails", n, len(ms))
	}

	sessions := make([]user.Session, n)
	errs := together(n, func(i int) error {
		s, err := b.svc.SignIn(ctx, ms[i].Link.Code)
		sessions[i] = s
		return err
	})
	ids := map[uuid.UUID]int{}
	var failed int
	for i, err := range errs {
		if err != nil {
			failed++
			if failed <= 3 {
				t.Errorf("sign-in %d: %v", i, err)
			}
			continue
		}
		ids[sessions[i].User.ID]++
	}
	if failed > 0 {
		t.Errorf("%d of %d simultaneous sign-ins failed, want none", failed, n)
	}
	if len(ids) != 1 {
		t.Errorf("simultaneous sign-ins returned %d user IDs, want 1: %v", len(ids), ids)
	}
	if c := b.count(t, `SELECT count(*) FROM users WHERE email = $1`, address); c != 1 {
		t.Errorf("users table holds %d rows for %s, want 1", c, address)
	}
	if c := b.count(t, `SELECT count(*) FROM users`); c != 1 {
		t.Errorf("users table holds %d rows, want 1", c)
	}
	if c := b.count(t, `SELECT count(*) FROM events WHERE type = $1`, user.TypeRegistered); c != 1 {
		t.Errorf("%d %s events, want 1", c, user.TypeRegistered)
	}
	if c := b.count(t, `SELECT count(*) FROM sessions`); c != n-failed {
		t.Errorf("sessions table holds %d rows, want %d", c, n-failed)
	}
}

func TestConcurrentUseOfOneCode(t *testing.T) {
	t.Parallel()
	const n = 20
	b := setup(t)
	ctx := t.Context()
	code := b.link(t, "ada@example.com", "ada@example.com")

	errs := together(n, func(int) error {
		_, err := b.svc.SignIn(ctx, code)
		return err
	})
	var won, refused int
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, user.ErrInvalidCode):
			refused++
		default:
			t.Errorf("sign-in %d: %v", i, err)
		}
	}
	if won != 1 || refused != n-1 {
		t.Errorf("%d simultaneous uses of one code: %d succeeded, %d got ErrInvalidCode; want 1 and %d", n, won, refused, n-1)
	}
	if c := b.count(t, `SELECT count(*) FROM sessions`); c != 1 {
		t.Errorf("sessions table holds %d rows, want 1", c)
	}
	if c := b.count(t, `SELECT count(*) FROM events WHERE type = $1`, user.TypeSignInLinkUsed); c != 1 {
		t.Errorf("%d %s events, want 1", c, user.TypeSignInLinkUsed)
	}
}

func TestConcurrentEmailChangesToOneAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	for round := range 5 {
		target := fmt.Sprintf("prize%d@example.com", round)
		racers := []user.Session{
			b.signIn(t, fmt.Sprintf("left%d@example.com", round)),
			b.signIn(t, fmt.Sprintf("right%d@example.com", round)),
		}
		codes := []string{
			b.changeCode(t, racers[0].Token, target),
			b.changeCode(t, racers[1].Token, target),
		}
		got := make([]user.User, 2)
		errs := together(2, func(i int) error {
			u, err := b.svc.ConfirmEmailChange(ctx, codes[i], racers[i].Token)
			got[i] = u
			return err
		})
		b.mails(t) // The notice to the address the winner left.
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: both users confirmed %s", round, target)
				}
				winner = i
			case !errors.Is(err, user.ErrEmailTaken):
				t.Errorf("round %d: racer %d: %v, want success or ErrEmailTaken", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: neither racer confirmed %s: %v", round, target, errs)
		}
		loser := 1 - winner
		if got[winner].ID != racers[winner].User.ID || got[winner].Email != target {
			t.Errorf("round %d: winner got %+v", round, got[winner])
		}
		if u := b.me(t, racers[winner].Token); u.Email != target {
			t.Errorf("round %d: winner's Me shows %q, want %q", round, u.Email, target)
		}
		sameUser(t, "loser's Me", b.me(t, racers[loser].Token), racers[loser].User)
		if c := b.count(t, `SELECT count(*) FROM users WHERE email = $1`, target); c != 1 {
			t.Errorf("round %d: %d users hold %s", round, c, target)
		}
		if c := countOf(b.addresses(t, user.TypeEmailChanged, "new_email"), target); c != 1 {
			t.Errorf("round %d: %d %s events for %s, want 1", round, c, user.TypeEmailChanged, target)
		}
	}
}

// TestCodesTellWhatTheyDoAndUseNothing: SignInAddress and EmailChangeOf
// name what a code would do without using it, and refuse a code that is
// unknown, used or expired as the commands do.
func TestCodesTellWhatTheyDoAndUseNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	code := b.link(t, "Ada@Example.com", "ada@example.com")
	events := b.events(t)
	for range 2 {
		if email, err := b.svc.SignInAddress(ctx, code); err != nil || email != "ada@example.com" {
			t.Fatalf("SignInAddress: %q, %v; want ada@example.com", email, err)
		}
	}
	b.unchanged(t, "SignInAddress", events)
	ada, err := b.svc.SignIn(ctx, code)
	if err != nil {
		t.Fatalf("SignIn after SignInAddress: %v", err)
	}
	if _, err := b.svc.SignInAddress(ctx, code); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("SignInAddress of a used code: %v, want ErrInvalidCode", err)
	}

	change := b.changeCode(t, ada.Token, "grace@example.com")
	events = b.events(t)
	if from, to, err := b.svc.EmailChangeOf(ctx, change); err != nil || from != "ada@example.com" || to != "grace@example.com" {
		t.Fatalf("EmailChangeOf: %q -> %q, %v; want ada@example.com -> grace@example.com", from, to, err)
	}
	b.unchanged(t, "EmailChangeOf", events)

	expiring := b.link(t, "bob@example.com", "bob@example.com")
	b.clock.Advance(linkTTL)
	if _, err := b.svc.SignInAddress(ctx, expiring); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("SignInAddress of an expired code: %v, want ErrInvalidCode", err)
	}
	if _, _, err := b.svc.EmailChangeOf(ctx, change); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("EmailChangeOf of an expired code: %v, want ErrInvalidCode", err)
	}
	for _, bad := range []string{"", "nope", strings.Repeat("a", len(code))} {
		if _, err := b.svc.SignInAddress(ctx, bad); !errors.Is(err, user.ErrInvalidCode) {
			t.Errorf("SignInAddress(%q): %v, want ErrInvalidCode", bad, err)
		}
		if _, _, err := b.svc.EmailChangeOf(ctx, bad); !errors.Is(err, user.ErrInvalidCode) {
			t.Errorf("EmailChangeOf(%q): %v, want ErrInvalidCode", bad, err)
		}
	}
}
