package viewstest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/user"
)

// EmailChange: someone with one of Ada's sessions moves her account to
// their address. The confirmation ends her other session, and the mail to
// her address names the new one masked and carries a code that moves the
// account back, ends every session and voids the change they asked for
// next. The code works once.
func testUndoEmailChange(t *testing.T, s *suite) {
	ctx := t.Context()
	ada := s.signIn(t, "ada@example.com")
	thief := s.signIn(t, "ada@example.com")
	from, to, undo := s.confirmWithUndo(t, s.changeCode(t, thief, "thief@example.net"), thief.Token)
	if from != "ada@example.com" || to != "thief@example.net" {
		t.Fatalf("the change moved %s to %s", from, to)
	}
	if undo.masked != "t***@e***.net" {
		t.Errorf("the notice names the new address %q, want t***@e***.net", undo.masked)
	}
	if want := s.clock.Now().Add(7 * 24 * time.Hour); !undo.expiresAt.Equal(want) {
		t.Errorf("the undo code expires at %s, want in 7 days, %s", undo.expiresAt, want)
	}
	s.wantSignedOut(t, "other than the one that confirmed", ada)
	s.wantSignedIn(t, "that confirmed", thief)
	next := s.changeCode(t, thief, "thief.again@example.net")

	if got, err := s.svc.UndoEmailAddress(ctx, undo.plain); err != nil || got != "ada@example.com" {
		t.Fatalf("UndoEmailAddress = %q, %v; want ada@example.com", got, err)
	}
	u, err := s.svc.UndoEmailChange(ctx, undo.plain)
	if err != nil {
		t.Fatalf("UndoEmailChange: %v", err)
	}
	if u.ID != ada.User.ID || u.Email != "ada@example.com" {
		t.Errorf("UndoEmailChange = %+v, want Ada's account at ada@example.com", u)
	}
	s.wantUser(t, user.User{ID: ada.User.ID, Email: "ada@example.com", CreatedAt: ada.User.CreatedAt})
	s.wantSignedOut(t, "after the undo", thief)
	if _, err := s.svc.ConfirmEmailChange(ctx, next.plain, ""); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("ConfirmEmailChange of a change asked for before the undo: %v, want ErrInvalidCode", err)
	}
	want := []string{user.EndedByEmailChange, user.EndedByUndo}
	if got := s.endedFor(t, ada.User.ID); !slices.Equal(got, want) {
		t.Errorf("the ends of Ada's sessions in the log say %q, want %q", got, want)
	}

	events := len(s.log(t))
	if _, err := s.svc.UndoEmailChange(ctx, undo.plain); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("a second UndoEmailChange: %v, want ErrInvalidCode", err)
	}
	if n := len(s.log(t)); n != events {
		t.Errorf("a second undo appended %d events", n-events)
	}
	s.rebuildKeeps(t, "an undone change")
	if again := s.signIn(t, "ada@example.com"); again.User.ID != ada.User.ID {
		t.Errorf("ada@example.com signs in to %s, want her account %s", again.User.ID, ada.User.ID)
	}
}

// EmailChange: an undo code changes nothing when another account holds the
// old address now, when it has expired, or when its account is erased.
func testUndoRefused(t *testing.T, s *suite) {
	ctx := t.Context()
	refused := func(t *testing.T, what string, code undoCode, want error) {
		t.Helper()
		events := len(s.log(t))
		if _, err := s.svc.UndoEmailChange(ctx, code.plain); !errors.Is(err, want) {
			t.Errorf("UndoEmailChange %s: %v, want %v", what, err, want)
		}
		if n := len(s.log(t)); n != events {
			t.Errorf("UndoEmailChange %s appended %d events", what, n-events)
		}
	}

	ada := s.signIn(t, "ada@example.com")
	_, _, adaUndo := s.confirmWithUndo(t, s.changeCode(t, ada, "ada@example.net"), ada.Token)
	s.signIn(t, "ada@example.com") // Someone else signs up with the address she left.
	refused(t, "of an address taken since", adaUndo, user.ErrEmailTaken)
	s.wantSignedIn(t, "after a refused undo", ada)
	s.wantUser(t, user.User{ID: ada.User.ID, Email: "ada@example.net", CreatedAt: ada.User.CreatedAt})

	// A confirmation from no session of the account ends them all.
	bob := s.signIn(t, "bob@example.com")
	_, _, bobUndo := s.confirmWithUndo(t, s.changeCode(t, bob, "bob@example.net"), "")
	s.wantSignedOut(t, "when no session of the account confirmed", bob)

	cy := s.signIn(t, "cy@example.com")
	_, _, cyUndo := s.confirmWithUndo(t, s.changeCode(t, cy, "cy@example.net"), cy.Token)
	if err := s.svc.DeleteAccount(ctx, cy.Token); err != nil {
		t.Fatal(err)
	}
	refused(t, "of an erased account", cyUndo, user.ErrInvalidCode)

	s.clock.Advance(7*24*time.Hour - time.Microsecond)
	if _, err := s.svc.UndoEmailAddress(ctx, bobUndo.plain); err != nil {
		t.Errorf("UndoEmailAddress just before expiry: %v", err)
	}
	s.clock.Advance(time.Microsecond)
	if _, err := s.svc.UndoEmailAddress(ctx, bobUndo.plain); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("UndoEmailAddress of an expired code: %v, want ErrInvalidCode", err)
	}
	refused(t, "of an expired code", bobUndo, user.ErrInvalidCode)
	refused(t, "of a malformed code", undoCode{code: code{plain: "nonsense"}}, user.ErrInvalidCode)
}
