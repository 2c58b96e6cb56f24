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

// SessionEnded records a sign-out.
type SessionEnded struct {
	UserID    uuid.UUID `json:"user_id"`
	TokenHash string    `json:"token_hash"`
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

// session returns the user of a live session token and the token's hash,
// from the sessions view, which the events of the user's stream keep in
// the transaction that appends them: a token works from the commit of its
// SessionStarted until its expiry or the commit of its SessionEnded.
func (s *Service) session(ctx context.Context, tx uow.Tx, token string) (uuid.UUID, string, error) {
	if !validSecret(token) {
		return uuid.Nil, "", ErrUnauthenticated
	}
	return s.sessionOf(ctx, tx, hashSecret(token))
}

// sessionOf returns the user of the live session with the token hash.
func (s *Service) sessionOf(ctx context.Context, tx uow.Tx, hash string) (uuid.UUID, string, error) {
	id, expires, ok, err := s.Views.Session(ctx, tx, hash)
	if err != nil {
		return uuid.Nil, "", err
	}
	if !ok || !tx.Now().Before(expires) {
		return uuid.Nil, "", ErrUnauthenticated
	}
	return id, hash, nil
}

// authenticate returns the account of a live session token
// ([Service.session]) for a command. The session is read again after the
// account ([Service.loadAccount]): a sign-out that committed before the
// account's version was read is seen then, and one that commits after it
// fails the command's append.
func (s *Service) authenticate(ctx context.Context, tx uow.Tx, token string) (account, string, error) {
	id, hash, err := s.session(ctx, tx, token)
	if err != nil {
		return account{}, "", err
	}
	acct, err := s.loadAccount(ctx, tx, id)
	if err != nil {
		return account{}, "", err
	}
	if again, _, err := s.sessionOf(ctx, tx, hash); err != nil {
		return account{}, "", err
	} else if again != id {
		return account{}, "", ErrUnauthenticated
	}
	return acct, hash, nil
}

// Me returns the user of a session token, or [ErrUnauthenticated]. It
// changes nothing, so it runs in a read-only unit of work, which waits for
// no command, and it reads two rows of the views, whatever the account's
// history.
func (s *Service) Me(ctx context.Context, token string) (User, error) {
	var u User
	err := s.read(ctx, "user.Me", func(ctx context.Context, tx uow.Tx) error {
		id, _, err := s.session(ctx, tx, token)
		if err != nil {
			return err
		}
		u, err = s.user(ctx, tx, id)
		return err
	})
	return u, err
}

// SignOut ends the session of token. It returns [ErrUnauthenticated].
func (s *Service) SignOut(ctx context.Context, token string) error {
	return s.do(ctx, "user.SignOut", func(ctx context.Context, tx uow.Tx) error {
		acct, hash, err := s.authenticate(ctx, tx, token)
		if err != nil {
			return err
		}
		e, err := event(TypeSessionEnded, SessionEnded{UserID: acct.id, TokenHash: hash})
		if err != nil {
			return err
		}
		_, err = s.appendAndApply(ctx, tx, userStream(acct.id), eventstore.Exactly(acct.version), e)
		return err
	})
}
