package user

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/aggregate"
	"github.com/eventsourced/accounts/internal/eventstore"
)

// signInLinks is the state of one address's sign-in stream: the links it
// was sent, which are used, and when they were asked for.
type signInLinks struct {
	version  int64
	requests []time.Time
	codes    []signInCode
}

type signInCode struct {
	hash      string
	expiresAt time.Time
	used      bool
}

// foldSignInLinks returns the state of a sign-in stream at version from
// its recent events: those that can still count, which need not be all.
func foldSignInLinks(events []eventstore.Event, version int64) (signInLinks, error) {
	return signInFold.Run(signInLinks{version: version}, events...)
}

// signInFold is the evolve of a sign-in stream.
var signInFold = func() *aggregate.Fold[signInLinks] {
	f := aggregate.NewFold[signInLinks](events)
	aggregate.On(f, func(s signInLinks, _ eventstore.Event, d SignInLinkRequested) signInLinks {
		s.requests = append(s.requests, d.RequestedAt)
		s.codes = append(s.codes, signInCode{hash: d.CodeHash, expiresAt: d.ExpiresAt})
		return s
	})
	aggregate.On(f, func(s signInLinks, _ eventstore.Event, d SignInLinkUsed) signInLinks {
		if c := s.code(d.CodeHash); c != nil {
			c.used = true
		}
		return s
	})
	aggregate.On(f, func(s signInLinks, _ eventstore.Event, d SignInForgotten) signInLinks {
		// The events before it are gone; their requests still count.
		s.requests = append(s.requests, d.Requests...)
		return s
	})
	return f
}()

// code returns the code with hash, comparing every hash in constant time.
func (s *signInLinks) code(hash string) *signInCode {
	var found *signInCode
	for i := range s.codes {
		if sameHash(s.codes[i].hash, hash) {
			found = &s.codes[i]
		}
	}
	return found
}

// retryAfter returns how long the address must wait before it may ask for
// another link at now, or 0 when it may ask now.
func (s signInLinks) retryAfter(now time.Time, p Policy) time.Duration {
	return p.linkWindow().RetryAfter(s.requests, now)
}

// use checks that the code with hash may sign in at now.
func (s signInLinks) use(hash string, now time.Time) error {
	c := s.code(hash)
	switch {
	case c == nil:
		return fmt.Errorf("%w: unknown sign-in code", ErrInvalidCode)
	case c.used:
		return fmt.Errorf("%w: sign-in code already used", ErrInvalidCode)
	case !now.Before(c.expiresAt):
		return fmt.Errorf("%w: sign-in code expired", ErrInvalidCode)
	}
	return nil
}

// account is the state of one user's stream that commands decide on: who
// it is, and, folded from the stream's recent events, the changes of
// address it asked for ([Service.loadAccount]).
type account struct {
	version   int64
	id        uuid.UUID
	email     string
	createdAt time.Time
	changes   []emailChange
	// changeRequests are the times of the user's email change requests,
	// limited as an address's sign-in links are, so that one account
	// cannot flood an inbox or probe many addresses.
	changeRequests []time.Time
}

type emailChange struct {
	hash string
	// newEmail is the address as the event holds it, sealed; [Service]
	// opens it for the one change a code names.
	newEmail  string
	expiresAt time.Time
	used      bool
	// taken says that the address had an account when the change was
	// asked for: no mail carried its code, and it confirms nothing.
	taken bool
	// superseded says that another change was confirmed after this one
	// was asked for ([Service.ConfirmEmailChange]).
	superseded bool
}

// foldAccount folds a stretch of a user's stream: the changes of address
// asked for in it, and which of them were made. Who the account is comes
// from the users view ([Service.loadAccount]).
func foldAccount(events []eventstore.Event) (account, error) {
	var a account
	for _, e := range events {
		a.version = e.Version
		var err error
		if a, err = accountFold.Evolve(a, e); err != nil {
			return a, err
		}
	}
	return a, nil
}

// accountFold is the evolve of a user's stream, as far as its commands
// decide on it: the changes of address.
var accountFold = func() *aggregate.Fold[account] {
	f := aggregate.NewFold[account](events)
	aggregate.On(f, func(a account, e eventstore.Event, d EmailChangeRequested) account {
		a.changes = append(a.changes, emailChange{hash: d.CodeHash, newEmail: d.NewEmail, expiresAt: d.ExpiresAt, taken: d.Taken})
		a.changeRequests = append(a.changeRequests, e.RecordedAt)
		return a
	})
	aggregate.On(f, func(a account, _ eventstore.Event, d EmailChanged) account {
		// A confirmed change voids the others asked for before it
		// ([Service.ConfirmEmailChange]).
		for i := range a.changes {
			a.changes[i].superseded = true
		}
		if c := a.change(d.CodeHash); c != nil {
			c.used, c.superseded = true, false
		}
		return a
	})
	aggregate.On(f, func(a account, _ eventstore.Event, _ EmailChangeUndone) account {
		// An undo voids every change asked for before it: whoever asked
		// may have been the one it signs out.
		for i := range a.changes {
			if !a.changes[i].used {
				a.changes[i].superseded = true
			}
		}
		return a
	})
	// Who the account is, its sessions and its erasure come from the
	// views, which the same transactions keep: no decision reads them
	// from the stream.
	aggregate.On(f, func(a account, _ eventstore.Event, _ Registered) account { return a })
	aggregate.On(f, func(a account, _ eventstore.Event, _ SessionStarted) account { return a })
	aggregate.On(f, func(a account, _ eventstore.Event, _ SessionEnded) account { return a })
	aggregate.On(f, func(a account, _ eventstore.Event, _ Erased) account { return a })
	return f
}()

func (a *account) change(hash string) *emailChange {
	var found *emailChange
	for i := range a.changes {
		if sameHash(a.changes[i].hash, hash) {
			found = &a.changes[i]
		}
	}
	return found
}
