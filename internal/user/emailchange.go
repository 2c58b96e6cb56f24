package user

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// The events of a change of address, in the account's stream.
const (
	TypeEmailChangeRequested = "user.email_change_requested"
	TypeEmailChanged         = "user.email_changed"
	TypeEmailChangeUndone    = "user.email_change_undone"
)

// UndoTTL is how long the link that undoes a change of address works,
// which the notice to the old address carries.
const UndoTTL = 7 * 24 * time.Hour

// EmailChangeRequested records a request to move to a new address: a
// confirmation link mailed to it, or, when the address had an account of
// its own at the time (Taken), a mail to it that says so and carries no
// link. Either way the request counts against the user's limit and shows
// in their activity alike, so the answer tells nobody whether an address
// has an account; a taken request's CodeHash is that of a code no mail
// carries, and it keeps no NewEmail, which is the owner's. NewEmail is
// sealed for the change alone ("change-CODEHASH"), whose key the sweep
// forgets once the request no longer matters (the longer of LinkWindow
// and LinkTTL, and a margin), and the erasure of the address's account
// forgets at once while the confirmation mail is still in the outbox
// with its code.
type EmailChangeRequested struct {
	UserID    uuid.UUID `json:"user_id"`
	NewEmail  string    `json:"new_email,omitempty"`
	CodeHash  string    `json:"code_hash"`
	ExpiresAt time.Time `json:"expires_at"`
	Taken     bool      `json:"taken,omitempty"`
}

// EmailChanged records a confirmed change of address. The old address was
// told, with a code that undoes the change until UndoExpiresAt
// ([Service.UndoEmailChange]); changes confirmed before such codes were
// mailed have no UndoCodeHash.
type EmailChanged struct {
	UserID        uuid.UUID `json:"user_id"`
	OldEmail      string    `json:"old_email"`
	NewEmail      string    `json:"new_email"`
	CodeHash      string    `json:"code_hash"`
	UndoCodeHash  string    `json:"undo_code_hash,omitempty"`
	UndoExpiresAt time.Time `json:"undo_expires_at,omitzero"`
}

// EmailChangeUndone records the undoing of a change of address by the
// code mailed to the address it left, which the account holds again
// (Email, sealed as the account's addresses are). It voids every change
// asked for before it, and comes with the end of every session.
type EmailChangeUndone struct {
	UserID   uuid.UUID `json:"user_id"`
	Email    string    `json:"email"`
	CodeHash string    `json:"code_hash"`
}

// liveChange returns the account and the change of address of a
// confirmation code that can still be used, or [ErrInvalidCode].
func (s *Service) liveChange(ctx context.Context, tx uow.Tx, hash string) (account, *emailChange, error) {
	id, ok, err := s.Views.EmailChangeCode(ctx, tx, hash)
	if err != nil {
		return account{}, nil, err
	}
	if !ok {
		return account{}, nil, fmt.Errorf("%w: unknown confirmation code", ErrInvalidCode)
	}
	acct, err := s.loadAccount(ctx, tx, id)
	if err != nil {
		return account{}, nil, err
	}
	c := acct.change(hash)
	switch {
	case c == nil, c.taken:
		return account{}, nil, fmt.Errorf("%w: unknown confirmation code", ErrInvalidCode)
	case c.used:
		return account{}, nil, fmt.Errorf("%w: confirmation code already used", ErrInvalidCode)
	case c.superseded:
		return account{}, nil, fmt.Errorf("%w: another change of address was confirmed since", ErrInvalidCode)
	case !tx.Now().Before(c.expiresAt):
		return account{}, nil, fmt.Errorf("%w: confirmation code expired", ErrInvalidCode)
	}
	to, ok, err := openAddress(ctx, tx, s.Keys, changeSubject(c.hash), c.newEmail)
	if err != nil {
		return account{}, nil, err
	}
	if !ok {
		return account{}, nil, fmt.Errorf("%w: the address of the confirmation code is erased", ErrInvalidCode)
	}
	change := *c
	change.newEmail = to
	return acct, &change, nil
}

// EmailChangeOf returns the address a confirmation code would move its
// account from and the one it would move it to, and uses nothing up, for
// the page a confirmation link opens. It returns [ErrInvalidCode] for a
// code that is unknown, used, expired or voided.
func (s *Service) EmailChangeOf(ctx context.Context, code string) (from, to string, err error) {
	if !validSecret(code) {
		return "", "", fmt.Errorf("%w: malformed", ErrInvalidCode)
	}
	hash := hashSecret(code)
	err = s.commands.Read(ctx, "user.EmailChangeOf", func(ctx context.Context, tx uow.Tx) error {
		acct, c, err := s.liveChange(ctx, tx, hash)
		if err != nil {
			return err
		}
		from, to = acct.email, c.newEmail
		return nil
	})
	return from, to, err
}

// RequestEmailChange mails a confirmation link to the new address of the
// session's user. Each user may ask as often as an address may ask for
// sign-in links ([Policy]). When the address has an account already, the
// mail to it says so instead of carrying a link, and the request is
// recorded and answered as any other ([EmailChangeRequested]): whether an
// address is taken is told only to its owner, and to the user when they
// confirm a link ([Service.ConfirmEmailChange]). It returns
// [ErrUnauthenticated], [ErrBadEmail], a [*TooManyRequestsError], or
// [ErrEmailTaken] for the user's own address, which tells them nothing new.
func (s *Service) RequestEmailChange(ctx context.Context, token, newAddress string) error {
	email, err := NormalizeEmail(newAddress)
	if err != nil {
		return err
	}
	secret, err := s.signInSecret(ctx)
	if err != nil {
		return err
	}
	return s.commands.Do(ctx, "user.RequestEmailChange", func(ctx context.Context, tx uow.Tx) error {
		acct, _, err := s.authenticate(ctx, tx, token)
		if err != nil {
			return err
		}
		if email == acct.email {
			return fmt.Errorf("%w: %s is the user's own address", ErrEmailTaken, email)
		}
		if wait := s.policy.linkWindow().RetryAfter(acct.changeRequests, tx.Now()); wait > 0 {
			return &TooManyRequestsError{RetryAfter: wait}
		}
		// Hold the new address's stream, as its account's erasure does,
		// so that the mail to its owner is either added before the
		// erasure, which then takes it, or finds the address free.
		if err := s.Events.Lock(ctx, tx, signInStream(secret, email)); err != nil {
			return err
		}
		_, taken, err := s.Views.UserByEmail(ctx, tx, email)
		if err != nil {
			return err
		}
		code, hash := newSecret()
		expires := tx.Now().Add(s.policy.LinkTTL)
		// Sealed for the change alone: the address may be another
		// person's, whose erasure, or the sweep once the change can no
		// longer be confirmed, forgets it. A taken address is not kept
		// at all: it is its owner's, and nothing asks for it again.
		sealed := ""
		if !taken {
			if sealed, err = s.sealUntil(ctx, tx, changeSubject(hash), email, tx.Now().Add(s.span())); err != nil {
				return err
			}
		}
		e, err := event(ctx, EmailChangeRequested{
			UserID: acct.id, NewEmail: sealed, CodeHash: hash, ExpiresAt: expires, Taken: taken,
		})
		if err != nil {
			return err
		}
		if _, err := s.appendAndApply(ctx, tx, userStream(acct.id), eventstore.Exactly(acct.version), e); err != nil {
			return err
		}
		if taken {
			return s.addMail(ctx, tx, mail.TopicEmailTaken, mail.Link{To: email, ExpiresAt: expires})
		}
		return s.addMail(ctx, tx, mail.TopicEmailChange, mail.Link{
			To: email, URL: s.baseURL + "/confirm-email?code=" + code, Code: code, ExpiresAt: expires,
			Account: acct.id.String(),
		})
	})
}

// ConfirmEmailChange uses a confirmation code and moves its user to the new
// address. A confirmation voids the codes of the user's other changes
// asked for before it: a link mailed to a mistyped address, corrected
// since, cannot move the account later. It ends every session of the
// account but the one of token, when token is a live session of it (the
// one that confirmed; "" is none), and mails the address it left a notice
// with a code that undoes the change for 7 days ([Service.UndoEmailChange]).
// It returns [ErrInvalidCode], or [ErrEmailTaken] when another account
// took the address meanwhile.
func (s *Service) ConfirmEmailChange(ctx context.Context, code, token string) (User, error) {
	if !validSecret(code) {
		return User{}, fmt.Errorf("%w: malformed", ErrInvalidCode)
	}
	hash := hashSecret(code)
	var u User
	err := s.commands.Do(ctx, "user.ConfirmEmailChange", func(ctx context.Context, tx uow.Tx) error {
		acct, c, err := s.liveChange(ctx, tx, hash)
		if err != nil {
			return err
		}
		stream := userStream(acct.id)
		oldSealed, err := s.seal(ctx, tx, stream, acct.email)
		if err != nil {
			return err
		}
		newSealed, err := s.seal(ctx, tx, stream, c.newEmail)
		if err != nil {
			return err
		}
		undo, undoHash := newSecret()
		undoExpires := tx.Now().Add(UndoTTL)
		change := EmailChanged{
			UserID: acct.id, OldEmail: oldSealed, NewEmail: newSealed, CodeHash: hash,
			UndoCodeHash: undoHash, UndoExpiresAt: undoExpires,
		}
		changed, err := event(ctx, change)
		if err != nil {
			return err
		}
		keep, err := s.confirmingSession(ctx, tx, token, acct.id)
		if err != nil {
			return err
		}
		ended, err := s.endSessions(ctx, tx, acct.id, keep, EndedByEmailChange)
		if err != nil {
			return err
		}
		appended, err := s.appendAndApply(ctx, tx, stream, eventstore.Exactly(acct.version), append([]eventstore.Event{changed}, ended...)...)
		if err != nil {
			return err
		}
		if err := s.addMail(ctx, tx, mail.TopicEmailChanged, mail.Link{
			To: acct.email, URL: s.baseURL + "/undo-email?code=" + undo, Code: undo, ExpiresAt: undoExpires,
			Account: acct.id.String(), NewAddress: MaskAddress(c.newEmail),
		}); err != nil {
			return err
		}
		if err := s.publish(ctx, tx, emailChanged(change, c.newEmail, appended[0].Version)); err != nil {
			return err
		}
		u = User{ID: acct.id, Email: c.newEmail, CreatedAt: acct.createdAt}
		return nil
	})
	return u, err
}

// confirmingSession returns the token hash of token when it is a live
// session of the account id, and "" otherwise: a confirmation from
// another account's session, or from none, keeps no session.
func (s *Service) confirmingSession(ctx context.Context, tx uow.Tx, token string, id uuid.UUID) (string, error) {
	if token == "" {
		return "", nil
	}
	r, err := s.liveSession(ctx, tx, token)
	if errors.Is(err, ErrUnauthenticated) || (err == nil && r.UserID != id) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return r.TokenHash, nil
}

// liveUndo returns the account, the change of address that an undo code
// can still undo, and the address the change left, or [ErrInvalidCode].
// The code's row names the change's place in the account's stream; the
// events from there on say whether it was undone since.
func (s *Service) liveUndo(ctx context.Context, tx uow.Tx, hash string) (account, string, error) {
	row, ok, err := s.Views.UndoCode(ctx, tx, hash)
	if err != nil {
		return account{}, "", err
	}
	if !ok {
		// Used codes and the codes of erased accounts have no row.
		return account{}, "", fmt.Errorf("%w: unknown or used undo code", ErrInvalidCode)
	}
	if !tx.Now().Before(row.ExpiresAt) {
		return account{}, "", fmt.Errorf("%w: undo code expired", ErrInvalidCode)
	}
	acct, err := s.loadAccount(ctx, tx, row.UserID)
	if err != nil {
		return account{}, "", err
	}
	events, err := s.Events.Load(ctx, tx, userStream(acct.id), row.Version)
	if err != nil {
		return account{}, "", err
	}
	if len(events) == 0 || events[0].Type != TypeEmailChanged {
		return account{}, "", fmt.Errorf("user: an undo code names version %d of %s, which is no change of address", row.Version, acct.id)
	}
	changed, err := Decode[EmailChanged](events[0])
	if err != nil {
		return account{}, "", err
	}
	for _, e := range events[1:] {
		if e.Version <= acct.version && e.Type == TypeEmailChangeUndone {
			return account{}, "", fmt.Errorf("%w: a change of address was undone since", ErrInvalidCode)
		}
	}
	old, ok, err := Address(ctx, tx, s.Keys, events[0], changed.OldEmail)
	if err != nil {
		return account{}, "", err
	}
	if !ok {
		return account{}, "", fmt.Errorf("%w: the address the change left is erased", ErrInvalidCode)
	}
	return acct, old, nil
}

// UndoEmailAddress returns the address that an undo code would move its
// account back to, and uses nothing up, for the page the undo link opens.
// It returns [ErrInvalidCode].
func (s *Service) UndoEmailAddress(ctx context.Context, code string) (string, error) {
	if !validSecret(code) {
		return "", fmt.Errorf("%w: malformed", ErrInvalidCode)
	}
	var old string
	err := s.commands.Read(ctx, "user.UndoEmailAddress", func(ctx context.Context, tx uow.Tx) error {
		var err error
		_, old, err = s.liveUndo(ctx, tx, hashSecret(code))
		return err
	})
	return old, err
}

// UndoEmailChange uses the code mailed to the address a change of address
// left ([Service.ConfirmEmailChange]): the account moves back to that
// address, every session of the account ends, and every change asked for
// before is void, so that whoever changed the address is signed out and
// cannot finish another change. The owner signs in again with the address.
// A code works once, for 7 days, and not after another change of the
// account was undone. It returns [ErrInvalidCode] for a code that is
// unknown, used, expired or void, or whose account is erased, and
// [ErrEmailTaken] when another account holds the old address now; either
// changes nothing.
func (s *Service) UndoEmailChange(ctx context.Context, code string) (User, error) {
	if !validSecret(code) {
		return User{}, fmt.Errorf("%w: malformed", ErrInvalidCode)
	}
	hash := hashSecret(code)
	var u User
	err := s.commands.Do(ctx, "user.UndoEmailChange", func(ctx context.Context, tx uow.Tx) error {
		acct, old, err := s.liveUndo(ctx, tx, hash)
		if err != nil {
			return err
		}
		if holder, taken, err := s.Views.UserByEmail(ctx, tx, old); err != nil {
			return err
		} else if taken && holder.ID != acct.id {
			return fmt.Errorf("%w: the address the change left has another account now", ErrEmailTaken)
		}
		stream := userStream(acct.id)
		sealed, err := s.seal(ctx, tx, stream, old)
		if err != nil {
			return err
		}
		undoing := EmailChangeUndone{UserID: acct.id, Email: sealed, CodeHash: hash}
		undone, err := event(ctx, undoing)
		if err != nil {
			return err
		}
		ended, err := s.endSessions(ctx, tx, acct.id, "", EndedByUndo)
		if err != nil {
			return err
		}
		appended, err := s.appendAndApply(ctx, tx, stream, eventstore.Exactly(acct.version), append([]eventstore.Event{undone}, ended...)...)
		if err != nil {
			return err
		}
		if err := s.publish(ctx, tx, emailChanged(undoing, old, appended[0].Version)); err != nil {
			return err
		}
		u = User{ID: acct.id, Email: old, CreatedAt: acct.createdAt}
		return nil
	})
	return u, err
}
