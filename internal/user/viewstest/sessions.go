package viewstest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/user"
)

// signInFrom signs in to email from a client that describes itself so.
func (s *suite) signInFrom(t *testing.T, email, client string) session {
	t.Helper()
	ss, err := s.svc.SignIn(user.WithClient(t.Context(), client), s.link(t, email).plain)
	if err != nil {
		t.Fatalf("SignIn of %s from %s: %v", email, client, err)
	}
	return session{Session: ss, hash: s.started(t, ss.User.ID).TokenHash.Hex()}
}

// sessions lists the sessions of the account of ss.
func (s *suite) sessions(t *testing.T, ss session) []user.SessionInfo {
	t.Helper()
	list, err := s.svc.Sessions(t.Context(), ss.Token)
	if err != nil {
		t.Fatalf("Sessions of %s: %v", ss.User.Email, err)
	}
	return list
}

// sessionID returns the ID under which the list of ss's account shows the
// session of client.
func (s *suite) sessionID(t *testing.T, ss session, client string) uuid.UUID {
	t.Helper()
	for _, info := range s.sessions(t, ss) {
		if info.Client == client {
			return info.ID
		}
	}
	t.Fatalf("the sessions of %s list none of %s", ss.User.Email, client)
	return uuid.Nil
}

// wantSignedOut checks that each session works no more.
func (s *suite) wantSignedOut(t *testing.T, what string, sessions ...session) {
	t.Helper()
	for _, ss := range sessions {
		if _, err := s.svc.Me(t.Context(), ss.Token); !errors.Is(err, user.ErrUnauthenticated) {
			t.Errorf("Me with a session %s: %v, want ErrUnauthenticated", what, err)
		}
	}
}

// wantSignedIn checks that each session still works.
func (s *suite) wantSignedIn(t *testing.T, what string, sessions ...session) {
	t.Helper()
	for _, ss := range sessions {
		if _, err := s.svc.Me(t.Context(), ss.Token); err != nil {
			t.Errorf("Me with a session %s: %v, want it to work", what, err)
		}
	}
}

// endedFor returns the reasons of the SessionEnded events of the account
// id in the log, in order.
func (s *suite) endedFor(t *testing.T, id uuid.UUID) []string {
	t.Helper()
	var reasons []string
	for _, e := range s.log(t) {
		if e.Type != user.TypeSessionEnded || e.Stream != userStream(id) {
			continue
		}
		d, err := user.Decode[user.SessionEnded](e)
		if err != nil {
			t.Fatal(err)
		}
		reasons = append(reasons, d.Reason)
	}
	return reasons
}

// Sessions: the owner lists the live sessions of the account, with the
// caller's marked, and ends one, or every other; each end is an event.
// Another account's session, an unknown ID and an expired session end
// nothing.
func testSessionsListAndEnd(t *testing.T, s *suite) {
	ctx := t.Context()
	// A session that has expired is not listed.
	s.signInFrom(t, "ada@example.com", "Edge on Windows")
	s.clock.Advance(sessionTTL)
	laptop := s.signInFrom(t, "ada@example.com", "Firefox on Linux")
	laptopAt := s.clock.Now()
	s.clock.Advance(time.Minute)
	phone := s.signInFrom(t, "ada@example.com", "Safari on iOS")
	s.clock.Advance(time.Minute)
	tablet := s.signInFrom(t, "ada@example.com", "Chrome on Android")
	bob := s.signInFrom(t, "bob@example.com", "curl")
	s.clock.Advance(30 * time.Second)

	list := s.sessions(t, laptop)
	var clients []string
	for _, info := range list {
		clients = append(clients, info.Client)
		if info.Current != (info.Client == "Firefox on Linux") {
			t.Errorf("session of %s: Current = %t", info.Client, info.Current)
		}
		if !info.ExpiresAt.Equal(info.StartedAt.Add(sessionTTL)) {
			t.Errorf("session of %s started %s, expires %s", info.Client, info.StartedAt, info.ExpiresAt)
		}
	}
	slices.Sort(clients)
	if want := []string{"Chrome on Android", "Firefox on Linux", "Safari on iOS"}; !slices.Equal(clients, want) {
		t.Fatalf("the sessions of Ada list %q, want %q (live ones of hers only)", clients, want)
	}
	if got := list[slices.IndexFunc(list, func(i user.SessionInfo) bool { return i.Current })]; !got.StartedAt.Equal(laptopAt) {
		t.Errorf("the laptop's session started %s, want %s", got.StartedAt, laptopAt)
	}

	events := len(s.log(t))
	for what, id := range map[string]uuid.UUID{
		"Bob's session":  s.sessionID(t, bob, "curl"),
		"an unknown one": uuid.New(),
	} {
		if err := s.svc.EndSession(ctx, laptop.Token, id); !errors.Is(err, user.ErrNoSuchSession) {
			t.Errorf("EndSession of %s: %v, want ErrNoSuchSession", what, err)
		}
	}
	if err := s.svc.EndSession(ctx, "nonsense", s.sessionID(t, laptop, "Safari on iOS")); !errors.Is(err, user.ErrUnauthenticated) {
		t.Errorf("EndSession without a session: %v, want ErrUnauthenticated", err)
	}
	if n := len(s.log(t)); n != events {
		t.Fatalf("refused ends appended %d events", n-events)
	}
	s.wantSignedIn(t, "that nothing ended", laptop, phone, tablet, bob)

	if err := s.svc.EndSession(ctx, laptop.Token, s.sessionID(t, laptop, "Safari on iOS")); err != nil {
		t.Fatalf("EndSession of the phone: %v", err)
	}
	s.wantSignedOut(t, "ended from another", phone)
	s.wantSignedIn(t, "that was not ended", laptop, tablet, bob)

	n, err := s.svc.EndOtherSessions(ctx, laptop.Token)
	if err != nil || n != 1 {
		t.Fatalf("EndOtherSessions = %d, %v; want 1 (the tablet)", n, err)
	}
	s.wantSignedOut(t, "ended as another", tablet)
	s.wantSignedIn(t, "that asked, or of another account", laptop, bob)
	if n, err := s.svc.EndOtherSessions(ctx, laptop.Token); err != nil || n != 0 {
		t.Errorf("EndOtherSessions again = %d, %v; want 0", n, err)
	}
	if got := s.sessions(t, laptop); len(got) != 1 || !got[0].Current {
		t.Errorf("after the ends the list is %+v, want the caller's alone", got)
	}

	// Ending one's own is a sign-out.
	if err := s.svc.EndSession(ctx, laptop.Token, s.sessionID(t, laptop, "Firefox on Linux")); err != nil {
		t.Fatalf("EndSession of the caller's own: %v", err)
	}
	s.wantSignedOut(t, "that ended itself", laptop)
	want := []string{user.EndedByOwner, user.EndedByOwner, user.EndedBySignOut}
	if got := s.endedFor(t, laptop.User.ID); !slices.Equal(got, want) {
		t.Errorf("the ends of Ada's sessions in the log say %q, want %q", got, want)
	}
	s.rebuildKeeps(t, "ended sessions")
}

// Sessions: the last use of a session is written at most once a minute,
// however often it is used, and a rebuild keeps it.
func testSessionLastUsed(t *testing.T, s *suite) {
	ada := s.signInFrom(t, "ada@example.com", "Firefox on Linux")
	started := s.clock.Now()
	lastUsed := func() time.Time {
		t.Helper()
		list := s.sessions(t, ada)
		if len(list) != 1 {
			t.Fatalf("Ada has %d sessions, want 1", len(list))
		}
		return list[0].LastUsedAt
	}
	if got := lastUsed(); !got.Equal(started) {
		t.Errorf("a new session was last used %s, want when it started, %s", got, started)
	}
	s.clock.Advance(59 * time.Second)
	s.wantSignedIn(t, "a little later", ada)
	if got := lastUsed(); !got.Equal(started) {
		t.Errorf("used 59 s after its start, the session shows its last use %s, want %s: it wrote within the minute", got, started)
	}
	s.clock.Advance(time.Second)
	used := s.clock.Now()
	s.wantSignedIn(t, "a minute later", ada)
	s.clock.Advance(30 * time.Second)
	s.wantSignedIn(t, "half a minute after that", ada)
	if got := lastUsed(); !got.Equal(used) {
		t.Errorf("used a minute after its start and again 30 s later, the last use is %s, want %s", got, used)
	}
	// A command's own unit of work writes it.
	s.clock.Advance(2 * time.Minute)
	s.changeCode(t, ada, "ada.new@example.com")
	if got, want := lastUsed(), s.clock.Now(); !got.Equal(want) {
		t.Errorf("after a change asked for, the last use is %s, want %s", got, want)
	}
	s.rebuildKeeps(t, "uses of a session")
	if got, want := lastUsed(), s.clock.Now(); !got.Equal(want) {
		t.Errorf("after a rebuild, the last use is %s, want %s", got, want)
	}
}
