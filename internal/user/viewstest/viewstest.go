package viewstest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// Harness is what the suite needs of a backend: fresh, empty stores per call.
type Harness struct {
	// Runner returns a runner whose units of work take their time from now.
	// The stores below accept its transactions.
	Runner func(now func() time.Time) uow.Runner
	// Events is the event store the service appends to and the rebuild
	// reads.
	Events eventstore.Store
	// Outbox is where the service adds the mails from which the suite takes
	// the codes.
	Outbox user.Outbox
	// Keys is the keyring that the service seals addresses with and the
	// projection opens them with.
	Keys *keyring.Keyring
	// Views are the views under test, which the suite drives through
	// [user.ViewsProjection] with Keys.
	Views user.Views
	// Tables, when set, returns every row of every projection table, as
	// text, by table. Rebuild/EqualsLive then also requires the rebuilt
	// tables to equal the live ones row for row, which proves more than the
	// queries can: no row is left that no key names.
	Tables func(t *testing.T) map[string][]string
}

// Run runs the suite. Each case is a parallel subtest that calls setup for
// stores of its own.
func Run(t *testing.T, setup func(t *testing.T) Harness) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			if h.Runner == nil || h.Events == nil || h.Outbox == nil || h.Views == nil {
				t.Fatalf("setup returned an incomplete harness: %+v", h)
			}
			c.run(t, newSuite(t, h))
		})
	}
}

// cases lists the suite; each name is "Query/Behaviour" or "Method/Behaviour".
var cases = []struct {
	name string
	run  func(t *testing.T, s *suite)
}{
	{"User/Registered", testUserRegistered},
	{"User/EmailChanged", testUserEmailChanged},
	{"SignInCode/UntilUsed", testSignInCodeUntilUsed},
	{"EmailChangeCode/UntilUsed", testEmailChangeCodeUntilUsed},
	{"Session/UntilSignOut", testSessionUntilSignOut},
	{"Sessions/ListAndEnd", testSessionsListAndEnd},
	{"Sessions/LastUsedAtMostOnceAMinute", testSessionLastUsed},
	{"EmailChange/Undo", testUndoEmailChange},
	{"EmailChange/UndoRefused", testUndoRefused},
	{"Sweep/ExpiredOnly", testSweepExpiredOnly},
	{"Sweep/RebuildAfterForgetting", testRebuildAfterForgetting},
	{"Apply/Erased", testErased},
	{"Apply/TimesFromEvents", testApplyTimesFromEvents},
	{"Apply/RegisteredForHeldAddress", testApplyRegisteredForHeldAddress},
	{"Apply/EmailChangedToHeldAddress", testApplyEmailChangedToHeldAddress},
	{"Apply/RefusesOtherTypes", testApplyRefusesOtherTypes},
	{"ReadOnly/RefusesApplyAndReset", testReadOnlyRefusesWrites},
	{"Rebuild/EqualsLive", testRebuildEqualsLive},
	{"Rebuild/EmptyLog", testRebuildEmptyLog},
	{"Fixtures/CoverEveryVersion", testFixturesCoverEveryVersion},
	{"Fixtures/LoadAndApply", testFixturesLoadAndApply},
}

// User and UserByEmail: a sign-in link alone makes no account; the first
// sign-in does, created at the Registered event's RecordedAt; later ones
// change nothing.
func testUserRegistered(t *testing.T, s *suite) {
	const ada, bob = "ada@example.com", "bob@example.com"
	s.wantNoUserByEmail(t, ada)
	s.link(t, ada)
	s.wantNoUserByEmail(t, ada)

	first := s.signIn(t, ada)
	_, reg := last(t, s, user.TypeRegistered, func(d user.Registered) bool { return d.Email == ada })
	if !reg.RecordedAt.Equal(start) {
		t.Fatalf("Registered was recorded at %s, want the clock's %s", showTime(reg.RecordedAt), showTime(start))
	}
	want := user.User{ID: first.User.ID, Email: ada, CreatedAt: reg.RecordedAt}
	s.wantUser(t, want)

	s.clock.Advance(time.Hour)
	if again := s.signIn(t, ada); again.User.ID != want.ID {
		t.Fatalf("the second sign-in of %s is to %s, want %s", ada, again.User.ID, want.ID)
	}
	s.wantUser(t, want)

	b := s.signIn(t, bob)
	s.wantUser(t, user.User{ID: b.User.ID, Email: bob, CreatedAt: start.Add(time.Hour)})
	s.wantUser(t, want)
	s.wantNoUser(t, newID(t))
	s.wantNoUserByEmail(t, "nobody@example.com")
}

// User and UserByEmail after a change of address: the old address is free,
// the new one held, created_at that of the registration; and another person
// can then take the old address.
func testUserEmailChanged(t *testing.T, s *suite) {
	const ada, adaNew = "ada@example.com", "ada.new@example.com"
	a := s.signIn(t, ada)
	s.clock.Advance(time.Minute)
	c := s.changeCode(t, a, adaNew)
	// A request alone moves nothing.
	s.wantUser(t, user.User{ID: a.User.ID, Email: ada, CreatedAt: start})
	s.wantNoUserByEmail(t, adaNew)

	s.clock.Advance(time.Minute)
	s.confirm(t, c, a)
	s.wantNoUserByEmail(t, ada)
	s.wantUser(t, user.User{ID: a.User.ID, Email: adaNew, CreatedAt: start})

	s.clock.Advance(time.Minute)
	d := s.signIn(t, ada)
	if d.User.ID == a.User.ID {
		t.Fatalf("a sign-in of the freed %s is to the account that left it", ada)
	}
	s.wantUser(t, user.User{ID: d.User.ID, Email: ada, CreatedAt: start.Add(3 * time.Minute)})
	s.wantUser(t, user.User{ID: a.User.ID, Email: adaNew, CreatedAt: start})
}

// SignInCode: a code answers its address from its request until its use;
// the use removes that code only.
func testSignInCodeUntilUsed(t *testing.T, s *suite) {
	const ada, bob = "ada@example.com", "bob@example.com"
	a1 := s.link(t, ada)
	s.wantSignInCode(t, "Ada's first code", a1.hash, ada)
	s.clock.Advance(time.Minute)
	a2 := s.link(t, ada)
	b1 := s.link(t, bob)
	s.wantSignInCode(t, "Ada's first code", a1.hash, ada)
	s.wantSignInCode(t, "Ada's second code", a2.hash, ada)
	s.wantSignInCode(t, "Bob's code", b1.hash, bob)

	if _, err := s.svc.SignIn(t.Context(), a1.plain); err != nil {
		t.Fatal(err)
	}
	s.wantNoSignInCode(t, "Ada's used code", a1.hash)
	s.wantSignInCode(t, "Ada's second code", a2.hash, ada)
	s.wantSignInCode(t, "Bob's code", b1.hash, bob)
	s.wantNoSignInCode(t, "an unknown hash", fakeHash("unknown"))

	if _, err := s.svc.SignIn(t.Context(), a2.plain); err != nil {
		t.Fatal(err)
	}
	s.wantNoSignInCode(t, "Ada's second used code", a2.hash)
	s.wantSignInCode(t, "Bob's code", b1.hash, bob)
}

// EmailChangeCode: a confirmation code answers its user from its request
// until its use; the use removes that code only. (The user's other
// pending code stays in the view until the sweep, but the domain refuses
// it once a change is confirmed.)
func testEmailChangeCodeUntilUsed(t *testing.T, s *suite) {
	a := s.signIn(t, "ada@example.com")
	b := s.signIn(t, "bob@example.com")
	c1 := s.changeCode(t, a, "ada.x@example.com")
	c2 := s.changeCode(t, a, "ada.y@example.com")
	d1 := s.changeCode(t, b, "bob.x@example.com")
	s.wantEmailChangeCode(t, "Ada's first code", c1.hash, a.User.ID)
	s.wantEmailChangeCode(t, "Ada's second code", c2.hash, a.User.ID)
	s.wantEmailChangeCode(t, "Bob's code", d1.hash, b.User.ID)
	s.wantNoEmailChangeCode(t, "an unknown hash", fakeHash("unknown"))

	s.clock.Advance(time.Minute)
	s.confirm(t, c1, a)
	s.wantNoEmailChangeCode(t, "Ada's used code", c1.hash)
	s.wantEmailChangeCode(t, "Ada's other code", c2.hash, a.User.ID)
	s.wantEmailChangeCode(t, "Bob's code", d1.hash, b.User.ID)

	c3 := s.changeCode(t, a, "ada.y@example.com")
	s.confirm(t, c3, a)
	s.wantNoEmailChangeCode(t, "Ada's second used code", c3.hash)
	s.wantEmailChangeCode(t, "Ada's voided code", c2.hash, a.User.ID)
	s.wantUser(t, user.User{ID: a.User.ID, Email: "ada.y@example.com", CreatedAt: start})
	s.wantNoUserByEmail(t, "ada.x@example.com")
	s.wantEmailChangeCode(t, "Bob's code", d1.hash, b.User.ID)
}

// Session: a session answers its user and expiry from its sign-in until
// its sign-out; the sign-out removes that session only.
func testSessionUntilSignOut(t *testing.T, s *suite) {
	a1 := s.signIn(t, "ada@example.com")
	if want := start.Add(sessionTTL); !a1.ExpiresAt.Equal(want) {
		t.Fatalf("SignIn's session expires at %s, want %s", showTime(a1.ExpiresAt), showTime(want))
	}
	s.wantSession(t, "Ada's first session", a1.hash, a1.User.ID, a1.ExpiresAt)
	s.clock.Advance(time.Hour)
	a2 := s.signIn(t, "ada@example.com")
	b1 := s.signIn(t, "bob@example.com")
	s.wantSession(t, "Ada's first session", a1.hash, a1.User.ID, start.Add(sessionTTL))
	s.wantSession(t, "Ada's second session", a2.hash, a1.User.ID, start.Add(time.Hour+sessionTTL))
	s.wantSession(t, "Bob's session", b1.hash, b1.User.ID, b1.ExpiresAt)
	s.wantNoSession(t, "an unknown hash", fakeHash("unknown"))

	s.signOut(t, a1)
	s.wantNoSession(t, "Ada's ended session", a1.hash)
	s.wantSession(t, "Ada's second session", a2.hash, a1.User.ID, a2.ExpiresAt)
	s.wantSession(t, "Bob's session", b1.hash, b1.User.ID, b1.ExpiresAt)

	s.signOut(t, b1)
	s.wantNoSession(t, "Bob's ended session", b1.hash)
	s.wantSession(t, "Ada's second session", a2.hash, a1.User.ID, a2.ExpiresAt)
}

// Apply: the times the views keep are the events' (RecordedAt and their
// expiries), never the unit of work's, which in a rebuild is much later,
// and a sweep judges expiry by them. The clock here stands a year after
// the events.
func testApplyTimesFromEvents(t *testing.T, s *suite) {
	s.clock.Set(start.AddDate(1, 0, 0))
	t0 := start
	id, email := newID(t), "una@example.com"

	s.apply(t, registered(t, id, email, t0))
	s.wantUser(t, user.User{ID: id, Email: email, CreatedAt: t0})

	// Sign-in codes of the address.
	code1, code2, code3 := fakeHash("code 1"), fakeHash("code 2"), fakeHash("code 3")
	s.apply(t, linkRequested(t, email, code1, t0, t0.Add(15*time.Minute)))
	s.apply(t, linkRequested(t, email, code2, t0.Add(10*time.Minute), t0.Add(25*time.Minute)))
	s.wantSignInCode(t, "a code not yet expired when the next was asked for", code1, email)
	s.apply(t, linkRequested(t, email, code3, t0.Add(15*time.Minute), t0.Add(30*time.Minute)))
	s.wantSignInCode(t, "a code expired when the next was asked for, before a sweep", code1, email)
	s.wantSignInCode(t, "the second code", code2, email)
	s.wantSignInCode(t, "the third code", code3, email)

	// Sessions of the user.
	tok1, tok2, tok3 := fakeHash("token 1"), fakeHash("token 2"), fakeHash("token 3")
	s.apply(t, sessionStarted(t, id, tok1, t0, t0.Add(time.Hour)))
	s.apply(t, sessionStarted(t, id, tok2, t0.Add(30*time.Minute), t0.Add(2*time.Hour)))
	s.wantSession(t, "a session not yet expired at the next sign-in", tok1, id, t0.Add(time.Hour))
	s.apply(t, sessionStarted(t, id, tok3, t0.Add(time.Hour), t0.Add(3*time.Hour)))
	s.wantSession(t, "a session expired at the next sign-in, before a sweep", tok1, id, t0.Add(time.Hour))
	s.wantSession(t, "the second session", tok2, id, t0.Add(2*time.Hour))
	s.wantSession(t, "the third session", tok3, id, t0.Add(3*time.Hour))

	// Confirmation codes of the user.
	chg1, chg2, chg3 := fakeHash("change 1"), fakeHash("change 2"), fakeHash("change 3")
	s.apply(t, changeRequested(t, id, "una.1@example.com", chg1, t0, t0.Add(15*time.Minute)))
	s.apply(t, changeRequested(t, id, "una.2@example.com", chg2, t0.Add(10*time.Minute), t0.Add(25*time.Minute)))
	s.wantEmailChangeCode(t, "a code not yet expired at the next request", chg1, id)
	s.apply(t, changeRequested(t, id, "una.3@example.com", chg3, t0.Add(15*time.Minute), t0.Add(30*time.Minute)))
	s.wantEmailChangeCode(t, "a code expired at the next request, before a sweep", chg1, id)
	s.wantEmailChangeCode(t, "the second code", chg2, id)
	s.wantEmailChangeCode(t, "the third code", chg3, id)

	// A sweep as of t0+25m takes what expired by then by the events' times:
	// the first and second codes of each kind, and no session yet; one row
	// of each table at a time, then the rest.
	s.sweepAt(t, t0.Add(25*time.Minute), 1, 2)
	s.sweepAt(t, t0.Add(25*time.Minute), 1000, 2)
	s.wantNoSignInCode(t, "the first code, swept", code1)
	s.wantNoSignInCode(t, "the second code, swept at its expiry", code2)
	s.wantSignInCode(t, "the third code, after the sweep", code3, email)
	s.wantNoEmailChangeCode(t, "the first change, swept", chg1)
	s.wantNoEmailChangeCode(t, "the second change, swept at its expiry", chg2)
	s.wantEmailChangeCode(t, "the third change, after the sweep", chg3, id)
	s.wantSession(t, "the first session, after the sweep", tok1, id, t0.Add(time.Hour))

	// A change of address keeps the time of registration.
	s.apply(t, emailChanged(t, id, email, "una.2@example.com", chg2, t0.Add(20*time.Minute)))
	s.wantUser(t, user.User{ID: id, Email: "una.2@example.com", CreatedAt: t0})
	s.wantNoEmailChangeCode(t, "the used code", chg2)
	s.wantEmailChangeCode(t, "the third code", chg3, id)
}

// applyConflict applies before and then conflict in one unit of work that
// rolls back with Apply's error, and checks that the error wraps
// [user.ErrEmailTaken].
func (s *suite) applyConflict(t *testing.T, before []eventstore.Event, conflict ...eventstore.Event) {
	t.Helper()
	var beforeErr, conflictErr error
	err := s.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if beforeErr = s.projection.Apply(ctx, tx, before...); beforeErr != nil {
			return beforeErr
		}
		conflictErr = s.projection.Apply(ctx, tx, conflict...)
		return conflictErr
	})
	if beforeErr != nil {
		t.Fatalf("Apply of %s before the conflict: %v", types(before), beforeErr)
	}
	if !errors.Is(conflictErr, user.ErrEmailTaken) {
		t.Errorf("Apply of %s = %v, want an error wrapping ErrEmailTaken", types(conflict), conflictErr)
	}
	if !errors.Is(err, conflictErr) || err == nil {
		t.Errorf("Do = %v, want Apply's error %v", err, conflictErr)
	}
}

// Apply: a Registered event for an address another user holds, or that an
// earlier event of the same call gives to another user, is an error
// wrapping ErrEmailTaken, and its unit of work rolls back leaving nothing.
func testApplyRegisteredForHeldAddress(t *testing.T, s *suite) {
	const ada = "ada@example.com"
	a := s.signIn(t, ada)
	holder := user.User{ID: a.User.ID, Email: ada, CreatedAt: start}
	s.clock.Advance(time.Minute)
	now := s.clock.Now()

	x, y := newID(t), newID(t)
	code, token := fakeHash("cy's code"), fakeHash("x's token")
	s.applyConflict(t,
		[]eventstore.Event{
			linkRequested(t, "cy@example.com", code, now, now.Add(linkTTL)),
			registered(t, x, "cy@example.com", now),
			sessionStarted(t, x, token, now, now.Add(sessionTTL)),
		},
		registered(t, y, ada, now),
	)
	s.wantUser(t, holder)
	s.wantNoUser(t, y)
	s.wantNoUser(t, x)
	s.wantNoUserByEmail(t, "cy@example.com")
	s.wantNoSignInCode(t, "a code of the rolled-back unit of work", code)
	s.wantNoSession(t, "a session of the rolled-back unit of work", token)
	s.wantSession(t, "the holder's session", a.hash, a.User.ID, a.ExpiresAt)

	// Two new users for one address in one call.
	z, w := newID(t), newID(t)
	s.applyConflict(t, nil, registered(t, z, "dee@example.com", now), registered(t, w, "dee@example.com", now))
	s.wantNoUserByEmail(t, "dee@example.com")
	s.wantNoUser(t, z)
	s.wantNoUser(t, w)

	// The views still take what conflicts with nothing.
	s.apply(t, registered(t, x, "cy@example.com", now))
	s.wantUser(t, user.User{ID: x, Email: "cy@example.com", CreatedAt: now})
	s.wantUser(t, holder)
}

// Apply: an EmailChanged event to an address another user holds is an
// error wrapping ErrEmailTaken, and its unit of work rolls back leaving
// nothing. Through the service, that is the loser of two users who asked
// for one address.
func testApplyEmailChangedToHeldAddress(t *testing.T, s *suite) {
	const ada, bob = "ada@example.com", "bob@example.com"
	a := s.signIn(t, ada)
	b := s.signIn(t, bob)
	bobsCode := s.changeCode(t, b, "bob.new@example.com")
	adaUser := user.User{ID: a.User.ID, Email: ada, CreatedAt: start}
	bobUser := user.User{ID: b.User.ID, Email: bob, CreatedAt: start}
	s.clock.Advance(time.Minute)
	now := s.clock.Now()

	token := fakeHash("bob's token")
	s.applyConflict(t,
		[]eventstore.Event{sessionStarted(t, b.User.ID, token, now, now.Add(sessionTTL))},
		emailChanged(t, b.User.ID, bob, ada, bobsCode.hash, now),
	)
	s.wantUser(t, adaUser)
	s.wantUser(t, bobUser)
	s.wantEmailChangeCode(t, "Bob's code, of the change rolled back", bobsCode.hash, b.User.ID)
	s.wantNoSession(t, "a session of the rolled-back unit of work", token)

	// Both ask for eve@; Ada confirms first, so Bob's confirmation fails in
	// the views and changes nothing.
	bobsRace := s.changeCode(t, b, "eve@example.com")
	adasRace := s.changeCode(t, a, "eve@example.com")
	s.confirm(t, adasRace, a)
	events := len(s.log(t))
	if _, err := s.svc.ConfirmEmailChange(t.Context(), bobsRace.plain, ""); !errors.Is(err, user.ErrEmailTaken) {
		t.Fatalf("ConfirmEmailChange of an address taken meanwhile: %v, want ErrEmailTaken", err)
	}
	if n := len(s.log(t)); n != events {
		t.Errorf("the refused confirmation left %d events in the log, want none", n-events)
	}
	s.wantUser(t, user.User{ID: a.User.ID, Email: "eve@example.com", CreatedAt: start})
	s.wantUser(t, bobUser)
	s.wantNoUserByEmail(t, ada)
	s.wantEmailChangeCode(t, "Bob's code, refused", bobsRace.hash, b.User.ID)
	s.wantNoEmailChangeCode(t, "Ada's used code", adasRace.hash)

	// Bob can still take the address Ada left.
	s.confirm(t, s.changeCode(t, b, ada), b)
	s.wantUser(t, user.User{ID: b.User.ID, Email: ada, CreatedAt: start})
	s.wantNoUserByEmail(t, bob)
}

// Apply: an event of a type the domain does not register is refused,
// whatever its data, with an error wrapping [projections.ErrUnhandled]:
// the views have no silent default, and nothing of the unit of work that
// applied it is kept.
func testApplyRefusesOtherTypes(t *testing.T, s *suite) {
	now := s.clock.Now()
	ghost, kept := newID(t), newID(t)
	code, token, change := fakeHash("ignored code"), fakeHash("ignored token"), fakeHash("ignored change")
	ignored := []eventstore.Event{
		made(t, "order-1", "order.placed", user.Registered{UserID: ghost, Email: "ghost@example.com"}, now),
		made(t, userStream(ghost), "user.registered_v2", user.Registered{UserID: ghost, Email: "ghost@example.com"}, now),
		made(t, userStream(ghost), "User.Registered", user.Registered{UserID: ghost, Email: "ghost@example.com"}, now),
		made(t, signInStream("ghost@example.com"), "signin.link_resent",
			user.SignInLinkRequested{Email: "ghost@example.com", CodeHash: code, ExpiresAt: now.Add(linkTTL)}, now),
		made(t, userStream(ghost), "user.session_refreshed",
			user.SessionStarted{TokenHash: tokenHash(t, token), ExpiresAt: now.Add(sessionTTL)}, now),
		made(t, userStream(ghost), "user.email_change_offered",
			user.EmailChangeRequested{UserID: ghost, NewEmail: "ghost.new@example.com", CodeHash: change, ExpiresAt: now.Add(linkTTL)}, now),
		made(t, "audit", "audit.noted", "just a string", now),
		made(t, "audit", "audit.listed", []int{1, 2, 3}, now),
	}
	keptEvent := registered(t, kept, "kept@example.com", now)
	for _, e := range ignored {
		err := s.runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			return s.projection.Apply(ctx, tx, keptEvent, e)
		})
		if !errors.Is(err, projections.ErrUnhandled) {
			t.Errorf("Apply of a %s event: %v, want projections.ErrUnhandled", e.Type, err)
		}
	}
	s.wantNoUser(t, ghost)
	s.wantNoUser(t, kept)
	s.wantNoUserByEmail(t, "ghost@example.com")
	s.wantNoSignInCode(t, "a code of an unregistered event", code)
	s.wantNoSession(t, "a session of an unregistered event", token)
	s.wantNoEmailChangeCode(t, "a code of an unregistered event", change)
	s.apply(t, keptEvent)
	s.wantUser(t, user.User{ID: kept, Email: "kept@example.com", CreatedAt: now})
}

// Apply and Reset in a read-only unit of work fail with an error wrapping
// [uow.ErrReadOnly] and change nothing, while the queries answer in it.
func testReadOnlyRefusesWrites(t *testing.T, s *suite) {
	kept, refused := newID(t), newID(t)
	keptUser := user.User{ID: kept, Email: "kept@example.com", CreatedAt: start}
	s.apply(t, registered(t, kept, keptUser.Email, start))
	for _, w := range []struct {
		name  string
		write func(ctx context.Context, tx uow.Tx) error
	}{
		{"Apply", func(ctx context.Context, tx uow.Tx) error {
			return s.projection.Apply(ctx, tx, registered(t, refused, "refused@example.com", start))
		}},
		{"Reset", s.projection.Reset},
	} {
		var writeErr error
		err := s.runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			if _, found, err := s.Views.User(ctx, tx, kept); err != nil || !found {
				return fmt.Errorf("User(%s) in a read-only unit of work before %s: found %t, %w", kept, w.name, found, err)
			}
			writeErr = w.write(ctx, tx)
			return writeErr
		})
		if !errors.Is(writeErr, uow.ErrReadOnly) || err != writeErr {
			t.Errorf("%s in a read-only unit of work: %v, and Read returned %v; want an error wrapping ErrReadOnly, returned as it is", w.name, writeErr, err)
		}
	}
	s.wantUser(t, keptUser)
	s.wantNoUser(t, refused)
	s.wantNoUserByEmail(t, "refused@example.com")
}

// rebuild rebuilds the views from the log and checks that it replayed all
// of it.
func (s *suite) rebuild(t *testing.T) int {
	t.Helper()
	want := len(s.log(t))
	n, err := projections.Rebuild(t.Context(), s.runner, s.Events, s.projection)
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if n != want {
		t.Fatalf("Rebuild replayed %d events, but the log holds %d", n, want)
	}
	return n
}

// Rebuild: after a varied history, rebuilding from the log answers every
// query as the live views did, and replaces what was wrong in them.
func testRebuildEqualsLive(t *testing.T, s *suite) {
	ctx := t.Context()
	// Several users sign in, some more than once; one signs out.
	ada := s.signIn(t, "ada@example.com")
	bob := s.signIn(t, "bob@example.com")
	bob2 := s.signIn(t, "bob@example.com")
	s.signOut(t, bob)
	cy := s.link(t, "cy@example.com") // Never used: it expires in the views.
	s.clock.Advance(time.Minute)

	// Ada moves to a new address; a later person, Dan, takes her old one.
	s.confirm(t, s.changeCode(t, ada, "ada.new@example.com"), ada)
	dan := s.signIn(t, "ada@example.com")
	s.clock.Advance(time.Minute)

	// Bob asks for a change he lets expire, and for one to a held address,
	// whose mail carries no link.
	s.changeCode(t, bob2, "bob.later@example.com")
	if err := s.svc.RequestEmailChange(ctx, bob2.Token, "ada.new@example.com"); err != nil {
		t.Fatalf("RequestEmailChange to a held address: %v", err)
	}
	s.oneMail(t, mail.TopicEmailTaken, "ada.new@example.com")

	// Bob and Dan both ask for one address; Dan confirms first, and Bob's
	// confirmation fails in the views, which roll back.
	bobRace := s.changeCode(t, bob2, "eve@example.com")
	s.confirm(t, s.changeCode(t, dan, "eve@example.com"), dan)
	if _, err := s.svc.ConfirmEmailChange(ctx, bobRace.plain, ""); !errors.Is(err, user.ErrEmailTaken) {
		t.Fatalf("ConfirmEmailChange of a taken address: %v, want ErrEmailTaken", err)
	}

	// Links expire: an expired code is refused; its row stays until a
	// sweep, which this history has none of.
	stale := s.link(t, "fay@example.com")
	s.clock.Advance(16 * time.Minute)
	if _, err := s.svc.SignIn(ctx, stale.plain); !errors.Is(err, user.ErrInvalidCode) {
		t.Fatalf("SignIn with an expired code: %v, want ErrInvalidCode", err)
	}
	fay := s.signIn(t, "fay@example.com")
	fayChange := s.changeCode(t, fay, "fay.new@example.com") // Left unconfirmed.

	// Sessions expire: a month on, Ada's and Bob's sessions are dead, and
	// their rows stay as Fay's do.
	s.clock.Advance(31 * 24 * time.Hour)
	if _, err := s.svc.Me(ctx, ada.Token); !errors.Is(err, user.ErrUnauthenticated) {
		t.Fatalf("Me with an expired session: %v, want ErrUnauthenticated", err)
	}
	s.signIn(t, "ada.new@example.com")
	bob3 := s.signIn(t, "bob@example.com")
	s.changeCode(t, bob3, "bob.much.later@example.com")
	gus := s.signIn(t, "gus@example.com")
	s.signOut(t, bob3)
	if eve := s.signIn(t, "eve@example.com"); eve.User.ID != dan.User.ID {
		t.Fatalf("eve@example.com signs in to %s, want Dan's account %s", eve.User.ID, dan.User.ID)
	}

	// Every key the log names, and some it does not.
	log := s.log(t)
	k := newKeys()
	k.addEvents(t, s.opened(t, log...)...)
	k.emails["nobody@example.com"], k.ids[uuid.Nil] = true, true
	k.signInCodes[fakeHash("unknown")], k.changeCodes[fakeHash("unknown")], k.tokenHashes[fakeHash("unknown")] = true, true, true
	// Events the log does not hold, to make the views wrong below: rows no
	// event made, and rows of the events removed or changed. Their keys are
	// asked too.
	fake, now := newID(t), s.clock.Now()
	mallory := "mallory@example.com"
	bogus := struct{ code, change, token string }{fakeHash("bogus code"), fakeHash("bogus change"), fakeHash("bogus token")}
	wrongEvents := []eventstore.Event{
		registered(t, fake, mallory, now),
		linkRequested(t, mallory, bogus.code, now, now.Add(linkTTL)),
		changeRequested(t, fake, "mallory.new@example.com", bogus.change, now, now.Add(linkTTL)),
		sessionStarted(t, fake, bogus.token, now, now.Add(sessionTTL)),
		sessionEnded(t, gus.User.ID, gus.hash, now),
		linkUsed(t, "cy@example.com", cy.hash, fake, now),
		emailChanged(t, fay.User.ID, "fay@example.com", "fay.stolen@example.com", fayChange.hash, now),
	}
	k.addEvents(t, wrongEvents...)
	live := s.answers(t, k)

	// The history is varied enough for the comparison to mean something.
	for _, q := range []string{"UserByEmail", "User", "SignInCode", "EmailChangeCode", "Session"} {
		if found, none := countFound(live, q); found == 0 || none == 0 {
			t.Fatalf("%s found %d and missed %d of the keys; the history should leave some of each", q, found, none)
		}
	}
	if found, _ := countFound(live, "User"); found != 5 {
		t.Errorf("User finds %d users, want 5 (Ada, Bob, Dan, Fay, Gus; Cy never signed in)", found)
	}
	s.wantUser(t, user.User{ID: ada.User.ID, Email: "ada.new@example.com", CreatedAt: start})
	s.wantUser(t, user.User{ID: dan.User.ID, Email: "eve@example.com", CreatedAt: start.Add(time.Minute)})
	s.wantNoUserByEmail(t, "ada@example.com")
	s.wantSignInCode(t, "Cy's expired code", cy.hash, "cy@example.com")
	s.wantSignInCode(t, "Fay's expired code", stale.hash, "fay@example.com")
	s.wantSession(t, "Ada's expired session", ada.hash, ada.User.ID, ada.ExpiresAt)
	s.wantSession(t, "Dan's expired session", dan.hash, dan.User.ID, dan.ExpiresAt)
	s.wantSession(t, "Fay's expired session", fay.hash, fay.User.ID, fay.ExpiresAt)
	s.wantNoSession(t, "Bob's ended session", bob3.hash)
	s.wantEmailChangeCode(t, "Bob's refused code", bobRace.hash, bob2.User.ID)
	s.wantEmailChangeCode(t, "Fay's expired code", fayChange.hash, fay.User.ID)

	var liveTables map[string][]string
	if s.Tables != nil {
		liveTables = s.Tables(t)
		for table, rows := range liveTables {
			if len(rows) == 0 {
				t.Fatalf("the history left table %s empty; comparing it would prove little", table)
			}
		}
	}

	// Make the views wrong, in a committed unit of work.
	s.apply(t, wrongEvents...)
	wrong := s.answers(t, k)
	for _, q := range []string{
		"User(" + fake.String() + ")",
		"UserByEmail(" + mallory + ")",
		"SignInCode(" + bogus.code + ")",
		"EmailChangeCode(" + bogus.change + ")",
		"Session(" + bogus.token + ")",
		"Session(" + gus.hash + ")",
		"SignInCode(" + cy.hash + ")",
		"UserByEmail(fay@example.com)",
		"User(" + fay.User.ID.String() + ")",
		"UserByEmail(fay.stolen@example.com)",
		"EmailChangeCode(" + fayChange.hash + ")",
	} {
		if wrong[q] == live[q] {
			t.Fatalf("%s = %s both before and after the views were made wrong", q, live[q])
		}
	}

	n := s.rebuild(t)
	if got := s.answers(t, k); len(diffAnswers(live, got)) > 0 {
		for _, d := range diffAnswers(live, got) {
			t.Errorf("after the rebuild, %s", d)
		}
		t.FailNow()
	}
	if s.Tables != nil {
		if got := s.Tables(t); !reflect.DeepEqual(got, liveTables) {
			t.Fatalf("after the rebuild the tables differ from the live ones:\nlive:    %v\nrebuilt: %v", liveTables, got)
		}
	}
	s.wantNoUser(t, fake)
	s.wantNoUserByEmail(t, mallory)
	s.wantNoUserByEmail(t, "fay.stolen@example.com")
	s.wantSession(t, "Gus's session", gus.hash, gus.User.ID, gus.ExpiresAt)

	// Rebuilding again changes nothing.
	if again := s.rebuild(t); again != n {
		t.Errorf("the second rebuild replayed %d events, the first %d", again, n)
	}
	for _, d := range diffAnswers(live, s.answers(t, k)) {
		t.Errorf("after a second rebuild, %s", d)
	}

	// The rebuilt views serve the commands as the live ones did.
	if u, err := s.svc.Me(ctx, gus.Token); err != nil || u.ID != gus.User.ID {
		t.Errorf("Me of Gus's live session after the rebuild = %v, %v", u, err)
	}
	hal := s.signIn(t, "hal@example.com")
	s.wantUser(t, user.User{ID: hal.User.ID, Email: "hal@example.com", CreatedAt: s.clock.Now()})
	s.wantSession(t, "Hal's session", hal.hash, hal.User.ID, hal.ExpiresAt)
}

// Rebuild: an empty log rebuilds empty views, whatever they held.
func testRebuildEmptyLog(t *testing.T, s *suite) {
	now := s.clock.Now()
	id := newID(t)
	code, change, token := fakeHash("code"), fakeHash("change"), fakeHash("token")
	s.apply(t,
		registered(t, id, "mallory@example.com", now),
		linkRequested(t, "mallory@example.com", code, now, now.Add(linkTTL)),
		changeRequested(t, id, "mallory.new@example.com", change, now, now.Add(linkTTL)),
		sessionStarted(t, id, token, now, now.Add(sessionTTL)),
	)
	s.wantUser(t, user.User{ID: id, Email: "mallory@example.com", CreatedAt: now})

	if n := s.rebuild(t); n != 0 {
		t.Fatalf("Rebuild of an empty log replayed %d events", n)
	}
	s.wantNoUser(t, id)
	s.wantNoUserByEmail(t, "mallory@example.com")
	s.wantNoSignInCode(t, "a code no event made", code)
	s.wantNoEmailChangeCode(t, "a code no event made", change)
	s.wantNoSession(t, "a session no event made", token)
}

// Sweep: a sweep deletes the rows of every link and session that has
// expired by its time, of every address and user, and no other; the
// service refused them before it and refuses them after it alike.
func testSweepExpiredOnly(t *testing.T, s *suite) {
	ctx := t.Context()
	a1 := s.signIn(t, "ada@example.com") // Expires at start+720h.
	b1 := s.signIn(t, "bob@example.com") // Expires at start+720h.
	s.clock.Advance(time.Hour)
	a2 := s.signIn(t, "ada@example.com") // Expires at start+721h.
	id := a1.User.ID

	s.clock.Set(a1.ExpiresAt.Add(-20 * time.Minute))
	l1 := s.link(t, "cy@example.com") // Expires 5 minutes before a1.
	c1 := s.changeCode(t, a2, "ada.x@example.com")
	s.clock.Advance(12 * time.Minute)
	l2 := s.link(t, "cy@example.com") // Expires 7 minutes after a1.
	c2 := s.changeCode(t, a2, "ada.y@example.com")

	s.clock.Set(a1.ExpiresAt)
	if _, err := s.svc.SignIn(ctx, l1.plain); !errors.Is(err, user.ErrInvalidCode) {
		t.Fatalf("SignIn with an expired code before the sweep: %v, want ErrInvalidCode", err)
	}
	// Just expired is not swept yet: an instance whose clock runs ahead
	// must not sweep what the others still take as live.
	if n, err := s.svc.Sweep(ctx); err != nil || n != 2 {
		t.Fatalf("Sweep just after a1's expiry deleted %d rows (%v), want Cy's first link and Ada's first change, 5 minutes past, alone", n, err)
	}
	s.wantSession(t, "Ada's just expired session", a1.hash, id, a1.ExpiresAt)
	s.clock.Set(a1.ExpiresAt.Add(5 * time.Minute))
	n, err := s.svc.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Ada's and Bob's first sessions; Cy's first link and Ada's first
	// change went before.
	if n != 2 {
		t.Errorf("Sweep deleted %d rows, want 2", n)
	}
	s.wantNoSession(t, "Ada's expired session", a1.hash)
	s.wantNoSession(t, "Bob's expired session", b1.hash)
	s.wantSession(t, "Ada's live session", a2.hash, id, a2.ExpiresAt)
	s.wantNoSignInCode(t, "Cy's expired code", l1.hash)
	s.wantSignInCode(t, "Cy's live code", l2.hash, "cy@example.com")
	s.wantNoEmailChangeCode(t, "Ada's expired change", c1.hash)
	s.wantEmailChangeCode(t, "Ada's live change", c2.hash, id)
	if _, err := s.svc.SignIn(ctx, l1.plain); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("SignIn with an expired code after the sweep: %v, want ErrInvalidCode", err)
	}
	if _, err := s.svc.Me(ctx, a1.Token); !errors.Is(err, user.ErrUnauthenticated) {
		t.Errorf("Me with an expired session after the sweep: %v, want ErrUnauthenticated", err)
	}
	if n, err := s.svc.Sweep(ctx); err != nil || n != 0 {
		t.Errorf("a second sweep deleted %d rows (%v), want 0", n, err)
	}
	if _, err := s.svc.ConfirmEmailChange(ctx, c2.plain, ""); err != nil {
		t.Errorf("the live change after the sweep: %v", err)
	}
}

// Sweep: once the sweeps have deleted what expired, forgotten the
// addresses that asked for no link lately and dropped all but the last
// event of their sign-in streams, a rebuild from what is left of the log
// makes the views the sweeps left, and every account still signs in.
func testRebuildAfterForgetting(t *testing.T, s *suite) {
	ctx := t.Context()
	ada := s.signIn(t, "ada@example.com")
	s.link(t, "cy@example.com") // Never used.
	s.link(t, "cy@example.com")
	s.clock.Advance(time.Hour)
	bob := s.signIn(t, "bob@example.com")
	live := s.link(t, "dee@example.com")
	if _, err := s.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.svc.ForgetIdleAddresses(ctx); err != nil || n != 2 {
		t.Fatalf("ForgetIdleAddresses = %d, %v; want Ada's and Cy's addresses, which asked for no link in the last hour", n, err)
	}
	s.rebuildKeeps(t, "forgetting")
	s.wantUser(t, user.User{ID: ada.User.ID, Email: "ada@example.com", CreatedAt: start})
	s.wantSignInCode(t, "Dee's live code", live.hash, "dee@example.com")
	if again := s.signIn(t, "ada@example.com"); again.User.ID != ada.User.ID {
		t.Errorf("ada@example.com signs in to %s after her address was forgotten, want her account %s", again.User.ID, ada.User.ID)
	}
	if again := s.signIn(t, "cy@example.com"); again.User.ID == ada.User.ID || again.User.ID == bob.User.ID {
		t.Errorf("cy@example.com signs in to another's account")
	}
}

// Apply: an erasure takes the account out of every view, its address's
// sign-in codes included, and leaves the others; a rebuild from the log
// makes the same views.
func testErased(t *testing.T, s *suite) {
	ctx := t.Context()
	ada := s.signIn(t, "ada@example.com")
	s.signIn(t, "ada@example.com")
	bob := s.signIn(t, "bob@example.com")
	change := s.changeCode(t, ada, "ada.new@example.com")
	link := s.link(t, "ada@example.com")
	bobLink := s.link(t, "bob@example.com")
	if err := s.svc.DeleteAccount(ctx, ada.Token); err != nil {
		t.Fatal(err)
	}
	s.wantNoUser(t, ada.User.ID)
	s.wantNoUserByEmail(t, "ada@example.com")
	s.wantNoSession(t, "Ada's session", ada.hash)
	s.wantNoEmailChangeCode(t, "Ada's change", change.hash)
	s.wantNoSignInCode(t, "the link to Ada's address", link.hash)
	s.wantSession(t, "Bob's session", bob.hash, bob.User.ID, bob.ExpiresAt)
	s.wantSignInCode(t, "Bob's link", bobLink.hash, "bob@example.com")
	s.rebuildKeeps(t, "an erasure")
	s.wantNoUser(t, ada.User.ID)
	if again := s.signIn(t, "ada@example.com"); again.User.ID == ada.User.ID {
		t.Error("the erased address signed in to the erased account")
	}
}

// rebuildKeeps rebuilds the views from the log and checks, where the
// harness can read the tables, that the rebuild made the rows the views
// held after what happened.
func (s *suite) rebuildKeeps(t *testing.T, what string) {
	t.Helper()
	var before map[string][]string
	if s.Tables != nil {
		before = s.Tables(t)
	}
	s.rebuild(t)
	if s.Tables != nil {
		if after := s.Tables(t); !maps.EqualFunc(before, after, slices.Equal) {
			t.Errorf("the rebuild after %s made\n%v\nwhere the views held\n%v", what, after, before)
		}
	}
}
