package user

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// TypeSessionEnded is the event of a sign-out, in the account's stream.
const TypeSessionEnded = "user.session_ended"

// SessionEnded records the end of a session, in the stream of its
// account, which names the account ([UserOf]): a sign-out, or an end that
// another session of the account, or a change of address, brought about.
// Reason says which ([EndedBySignOut] and the others).
//
// Version 2 left out user_id and holds the token's hash in bytes, as
// [SessionStarted] does from its version 2 on ([upcastSessionV1]).
type SessionEnded struct {
	TokenHash TokenHash `json:"token_hash"`
	Reason    string    `json:"reason,omitempty"`
}

// loadAccount returns the account of id as a command decides on it. Who
// it is comes from the users view, which each command's own transaction
// keeps; what it asked for lately (its change requests and their codes)
// comes from the tail of its stream: the events of the last LinkWindow or
// LinkTTL, whichever is longer, the only ones that can count against the
// limit or confirm a change, and those after them ([Service.loadTail]).
// So a command costs the same for an account with years of sign-ins as
// for a new one.
//
// The tail, and with it the version the command appends at, is read
// first, and the view after it. On PostgreSQL each statement of a unit of
// work sees what committed before it began, so the view then holds at
// least what the version covers; whatever commits later moves the stream
// past the version, and the command's append fails and is tried again.
func (s *Service) loadAccount(ctx context.Context, tx uow.Tx, id uuid.UUID) (account, error) {
	events, version, err := s.loadTail(ctx, tx, userStream(id))
	if err != nil {
		return account{}, err
	}
	a, err := foldAccount(events)
	if err != nil {
		return account{}, err
	}
	u, err := s.user(ctx, tx, id)
	if err != nil {
		return account{}, err
	}
	a.version, a.id, a.email, a.createdAt = version, u.ID, u.Email, u.CreatedAt
	return a, nil
}

// user returns the user with id from the users view, which holds every
// user that a session or code names.
func (s *Service) user(ctx context.Context, tx uow.Tx, id uuid.UUID) (User, error) {
	u, ok, err := s.Views.User(ctx, tx, id)
	if err != nil {
		return User{}, err
	}
	if !ok {
		// A session or code named it when the unit of work read it: an
		// erasure committed since, and the command, tried again, finds
		// the session or code gone with it.
		return User{}, fmt.Errorf("%w: account %s was erased meanwhile", eventstore.ErrConcurrency, id)
	}
	return u, nil
}

// liveSession returns the session of a live token, from the sessions
// view, which the events of the user's stream keep in the transaction
// that appends them: a token works from the commit of its SessionStarted
// until its expiry or the commit of its SessionEnded.
func (s *Service) liveSession(ctx context.Context, tx uow.Tx, token string) (SessionRow, error) {
	if !validSecret(token) {
		return SessionRow{}, ErrUnauthenticated
	}
	return s.sessionOf(ctx, tx, hashSecret(token))
}

// sessionOf returns the live session with the token hash.
func (s *Service) sessionOf(ctx context.Context, tx uow.Tx, hash string) (SessionRow, error) {
	r, ok, err := s.Views.Session(ctx, tx, hash)
	if err != nil {
		return SessionRow{}, err
	}
	if !ok || !tx.Now().Before(r.ExpiresAt) {
		return SessionRow{}, ErrUnauthenticated
	}
	return r, nil
}

// authenticate returns the account of a live session token
// ([Service.liveSession]) for a command, and the token's hash, and writes
// the session's last use when it is stale. The session is read again
// after the account ([Service.loadAccount]): a sign-out that committed
// before the account's version was read is seen then, and one that
// commits after it fails the command's append.
func (s *Service) authenticate(ctx context.Context, tx uow.Tx, token string) (account, string, error) {
	r, err := s.liveSession(ctx, tx, token)
	if err != nil {
		return account{}, "", err
	}
	acct, err := s.loadAccount(ctx, tx, r.UserID)
	if err != nil {
		return account{}, "", err
	}
	if again, err := s.sessionOf(ctx, tx, r.TokenHash); err != nil {
		return account{}, "", err
	} else if again.UserID != r.UserID {
		return account{}, "", ErrUnauthenticated
	}
	if err := s.touchIn(ctx, tx, r); err != nil {
		return account{}, "", err
	}
	return acct, r.TokenHash, nil
}

// Authenticate returns the user of a live session token, in the caller's
// unit of work tx, for a command of another domain that acts for the
// session's account. It authenticates as the service's own commands do,
// the session's last use written when it is stale, so tx must be one
// that writes ([uow.Runner.Do]).
//
// It holds the account's stream ("user-ID", [eventstore.Store.Lock])
// until tx ends, and takes it before it reads anything else of the
// account or writes anything. [Service.DeleteAccount] takes the same
// stream before it reads what it erases and runs its hooks
// ([WithErasure]). So tx and the account's erasure take turns:
//
//   - An erasure that committed before the stream was held is seen:
//     the session is gone with the account, and Authenticate returns
//     [ErrUnauthenticated].
//   - An erasure that has not committed by then waits until tx ends,
//     and then sees everything tx wrote, as its hooks do.
//
// What tx adds for the account, such as a membership, is then never
// left behind by the account's erasure. It returns [ErrUnauthenticated],
// and in a read-only unit of work an error wrapping [uow.ErrReadOnly].
func (s *Service) Authenticate(ctx context.Context, tx uow.Tx, token string) (User, error) {
	acct, _, err := s.authenticateHeld(ctx, tx, token)
	if err != nil {
		return User{}, err
	}
	return User{ID: acct.id, Email: acct.email, CreatedAt: acct.createdAt}, nil
}

// authenticateHeld is [Service.authenticate] holding the account's stream
// first. The session names the account; the stream is held before the
// session is read again with the account, and before the session's last
// use is written, so that two units of work on one session never each
// hold what the other waits for. On PostgreSQL each statement of a unit
// of work sees what committed before it began, so the reads after the
// lock see an erasure that committed before it: no session, and no
// account ([Service.user]).
func (s *Service) authenticateHeld(ctx context.Context, tx uow.Tx, token string) (account, string, error) {
	r, err := s.liveSession(ctx, tx, token)
	if err != nil {
		return account{}, "", err
	}
	if err := s.Events.Lock(ctx, tx, userStream(r.UserID)); err != nil {
		return account{}, "", err
	}
	acct, hash, err := s.authenticate(ctx, tx, token)
	if err != nil {
		return account{}, "", err
	}
	if acct.id != r.UserID {
		// A token names one account for good: this is no session of
		// the account held.
		return account{}, "", ErrUnauthenticated
	}
	return acct, hash, nil
}

// Me returns the user of a session token, or [ErrUnauthenticated]. It
// runs in a read-only unit of work, which waits for no command, and it
// reads two rows of the views, whatever the account's history; the
// session's last use is written after it, in a unit of work of its own,
// at most once a minute ([Service.Sessions]).
func (s *Service) Me(ctx context.Context, token string) (User, error) {
	var (
		u     User
		r     SessionRow
		stale bool
	)
	err := s.commands.Read(ctx, "user.Me", func(ctx context.Context, tx uow.Tx) error {
		var err error
		if r, err = s.liveSession(ctx, tx, token); err != nil {
			return err
		}
		stale = tx.Now().Sub(lastUsed(r)) >= touchEvery
		u, err = s.user(ctx, tx, r.UserID)
		return err
	})
	if err != nil {
		return User{}, err
	}
	s.touch(ctx, r, stale)
	return u, nil
}

// SignOut ends the session of token. It returns [ErrUnauthenticated].
func (s *Service) SignOut(ctx context.Context, token string) error {
	return s.commands.Do(ctx, "user.SignOut", func(ctx context.Context, tx uow.Tx) error {
		acct, hash, err := s.authenticate(ctx, tx, token)
		if err != nil {
			return err
		}
		e, err := sessionEnded(ctx, hash, EndedBySignOut)
		if err != nil {
			return err
		}
		_, err = s.appendAndApply(ctx, tx, userStream(acct.id), eventstore.Exactly(acct.version), e)
		return err
	})
}
