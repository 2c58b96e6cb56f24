package user

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// The events of the stream "signin-HASH": the sign-in links of one
// mailbox, named by a keyed hash of it (personal.go).
const (
	TypeSignInLinkRequested = "signin.link_requested"
	TypeSignInLinkUsed      = "signin.link_used"
)

// The events of the stream "user-<id>" that a sign-in appends: the
// account's creation at its first sign-in, and the session it starts.
const (
	TypeRegistered     = "user.registered"
	TypeSessionStarted = "user.session_started"
)

// SignInLinkRequested records a sign-in link sent to an address, at
// RequestedAt: the time the mailbox's limit counts it at.
//
// Version 2 added RequestedAt. Version 1 left it to the event's envelope,
// its RecordedAt, which is the clock of the unit of work that stored it;
// the request's time is part of the fact, and a copy of the log must not
// move it, so version 2 holds it, and the upcaster of version 1 fills it
// from the envelope ([upcastSignInLinkRequestedV1]).
type SignInLinkRequested struct {
	Email       string    `json:"email"`
	CodeHash    string    `json:"code_hash"`
	RequestedAt time.Time `json:"requested_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// upcastSignInLinkRequestedV1 turns version 1 of [SignInLinkRequested]
// into version 2: the request's time, which version 1 left to the
// envelope, from the event's RecordedAt.
func upcastSignInLinkRequestedV1(e eventstore.Event) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.Data, &fields); err != nil {
		return nil, err
	}
	at, err := json.Marshal(e.RecordedAt.UTC())
	if err != nil {
		return nil, err
	}
	fields["requested_at"] = at
	return json.Marshal(fields)
}

// SignInLinkUsed records the one use of a sign-in code. Email is the
// address in events written before addresses were sealed; later events
// leave it out: the stream's first event of the link holds it, sealed.
type SignInLinkUsed struct {
	Email    string    `json:"email,omitempty"`
	CodeHash string    `json:"code_hash"`
	UserID   uuid.UUID `json:"user_id"`
}

// Registered records the creation of an account at its first sign-in.
type Registered struct {
	UserID uuid.UUID `json:"user_id"`
	Email  string    `json:"email"`
}

// SessionStarted records a sign-in, in the stream of the account it
// signs in to, which names the account ([UserOf]). Client describes the
// client that signed in ([WithClient]); events written before it was kept
// have none.
//
// Version 2 left out user_id, which the stream names, and holds the
// token's hash in bytes ([TokenHash]) where version 1 held it in hex: the
// session events are most of the log, and each is stored in some 150
// bytes where version 1 took 220 ([upcastSessionV1]).
type SessionStarted struct {
	TokenHash TokenHash `json:"token_hash"`
	ExpiresAt time.Time `json:"expires_at"`
	Client    string    `json:"client,omitempty"`
}

// RequestSignInLink mails a sign-in link to the address, whether or not it
// has an account, so that the answer says nothing about who has one. It
// returns [ErrBadEmail] or a [*TooManyRequestsError].
func (s *Service) RequestSignInLink(ctx context.Context, address string) error {
	email, err := NormalizeEmail(address)
	if err != nil {
		return err
	}
	secret, err := s.signInSecret(ctx)
	if err != nil {
		return err
	}
	stream := signInStream(secret, email)
	// The request presumes the address below its limit and sends
	// everything in one round trip, whether or not it asked before, so
	// that its time tells nothing; only a request at the limit loads the
	// address's links and counts them.
	presumed := func(ctx context.Context, tx uow.Tx) error {
		return s.sendSignInLink(ctx, tx, stream, email, func(e eventstore.Event) ([]eventstore.Event, error) {
			return s.Events.AppendLaterIf(ctx, tx, stream, s.belowLinkLimit(tx), e)
		})
	}
	return s.commands.DoPresuming(ctx, "user.RequestSignInLink", presumed, func(ctx context.Context, tx uow.Tx) error {
		links, err := s.loadSignInLinks(ctx, tx, stream)
		if err != nil {
			return err
		}
		if wait := links.retryAfter(tx.Now(), s.policy); wait > 0 {
			return &TooManyRequestsError{RetryAfter: wait}
		}
		return s.sendSignInLink(ctx, tx, stream, email, func(e eventstore.Event) ([]eventstore.Event, error) {
			return s.Events.AppendLater(ctx, tx, stream, eventstore.Exactly(links.version), e)
		})
	})
}

// belowLinkLimit is the condition under which a sign-in stream may have
// another link without loading it: fewer requests than the limit since
// [Service.window], which begins no later than the limit's window, and no
// [SignInForgotten] since, whose one event may carry as many requests as
// the limit.
func (s *Service) belowLinkLimit(tx uow.Tx) eventstore.Condition {
	return eventstore.Condition{
		Since:   s.window(tx),
		Fewer:   s.policy.LinkLimit,
		Counted: []string{TypeSignInLinkRequested},
		Absent:  []string{TypeSignInForgotten},
	}
}

// sendSignInLink records a new sign-in link for email in its stream
// through appendEvent, and mails it.
func (s *Service) sendSignInLink(ctx context.Context, tx uow.Tx, stream, email string, appendEvent func(eventstore.Event) ([]eventstore.Event, error)) error {
	code, hash := newSecret()
	expires := tx.Now().Add(s.policy.LinkTTL)
	// The key of the address is kept while this link can count or sign
	// in, and forgotten by the sweep after.
	sealed, err := s.sealUntil(ctx, tx, stream, email, tx.Now().Add(s.span()))
	if err != nil {
		return err
	}
	e, err := event(ctx, SignInLinkRequested{Email: sealed, CodeHash: hash, RequestedAt: tx.Now(), ExpiresAt: expires})
	if err != nil {
		return err
	}
	appended, err := appendEvent(e)
	if err != nil {
		return err
	}
	if err := s.views.Apply(ctx, tx, appended...); err != nil {
		return err
	}
	return s.addMail(ctx, tx, mail.TopicLoginLink, mail.Link{
		To: email, URL: s.baseURL + "/sign-in?code=" + code, Code: code, ExpiresAt: expires,
	})
}

// SignIn uses a sign-in code and starts a session. The first sign-in of an
// address creates its account. It returns [ErrInvalidCode].
func (s *Service) SignIn(ctx context.Context, code string) (Session, error) {
	if !validSecret(code) {
		return Session{}, fmt.Errorf("%w: malformed", ErrInvalidCode)
	}
	hash := hashSecret(code)
	secret, err := s.signInSecret(ctx)
	if err != nil {
		return Session{}, err
	}
	var session Session
	err = s.commands.Do(ctx, "user.SignIn", func(ctx context.Context, tx uow.Tx) error {
		// Queue the sign-ins of this address, so that a crowd of them
		// (one link opened on several devices at once) wait their turn
		// instead of failing each other's appends.
		email, stream, links, err := s.liveSignIn(ctx, tx, secret, hash, true)
		if err != nil {
			return err
		}
		u, exists, err := s.Views.UserByEmail(ctx, tx, email)
		if err != nil {
			return err
		}
		acct := account{}
		var userEvents []eventstore.Event
		var reg Registered // the account's creation, when this sign-in makes it
		if exists {
			if acct, err = s.loadAccount(ctx, tx, u.ID); err != nil {
				return err
			}
			if acct.email != email {
				// The account moved to another address between the two
				// reads of the view; try again from the start.
				return fmt.Errorf("%w: %s moved to another address meanwhile", eventstore.ErrConcurrency, u.ID)
			}
		} else {
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			u = User{ID: id, Email: email, CreatedAt: tx.Now()}
			sealed, err := s.seal(ctx, tx, userStream(id), email)
			if err != nil {
				return err
			}
			reg = Registered{UserID: id, Email: sealed}
			e, err := event(ctx, reg)
			if err != nil {
				return err
			}
			userEvents = append(userEvents, e)
		}
		used, err := event(ctx, SignInLinkUsed{CodeHash: hash, UserID: u.ID})
		if err != nil {
			return err
		}
		if _, err := s.appendAndApply(ctx, tx, stream, eventstore.Exactly(links.version), used); err != nil {
			return err
		}
		token, tokenHash := newToken()
		expires := tx.Now().Add(s.policy.SessionTTL)
		start := SessionStarted{TokenHash: tokenHash, ExpiresAt: expires, Client: clientOf(ctx)}
		started, err := event(ctx, start)
		if err != nil {
			return err
		}
		userEvents = append(userEvents, started)
		appended, err := s.appendAndApply(ctx, tx, userStream(u.ID), eventstore.Exactly(acct.version), userEvents...)
		if errors.Is(err, ErrEmailTaken) {
			// Another first sign-in of this address won: sign in to its account.
			return fmt.Errorf("%w: %w", eventstore.ErrConcurrency, err)
		}
		if err != nil {
			return err
		}
		if !exists {
			if err := s.publish(ctx, tx, registered(reg, email, appended[0].Version)); err != nil {
				return err
			}
		}
		last := appended[len(appended)-1]
		if err := s.publish(ctx, tx, signedIn(u.ID, start, last.Version)); err != nil {
			return err
		}
		session = Session{Token: token, ExpiresAt: expires, User: u}
		return nil
	})
	return session, err
}

// loadSignInLinks returns the state of an address's sign-in links. Only
// links asked for within the last LinkWindow or LinkTTL, whichever is
// longer, can still count against the limit or sign in, so it loads just
// those ([Service.loadTail]): an address asked for often over
// years costs what a new one does.
func (s *Service) loadSignInLinks(ctx context.Context, tx uow.Tx, stream string) (signInLinks, error) {
	events, version, err := s.loadTail(ctx, tx, stream)
	if err != nil {
		return signInLinks{}, err
	}
	return foldSignInLinks(events, version)
}

// SignInAddress returns the address that a sign-in code would sign in,
// and uses nothing up: the page a link opens names the account its button
// signs into, so that nobody is signed into an account that someone else
// sent them the link of. It returns [ErrInvalidCode] for a code that is
// unknown, used or expired.
func (s *Service) SignInAddress(ctx context.Context, code string) (string, error) {
	if !validSecret(code) {
		return "", fmt.Errorf("%w: malformed", ErrInvalidCode)
	}
	hash := hashSecret(code)
	secret, err := s.signInSecret(ctx)
	if err != nil {
		return "", err
	}
	var email string
	err = s.commands.Read(ctx, "user.SignInAddress", func(ctx context.Context, tx uow.Tx) error {
		var err error
		email, _, _, err = s.liveSignIn(ctx, tx, secret, hash, false)
		return err
	})
	return email, err
}

// liveSignIn returns the address of a sign-in code that can still be used,
// its sign-in stream (named under secret) and the state of the address's
// links, or [ErrInvalidCode]. With lock it holds the address's stream
// first ([eventstore.Store.Lock]), for a command that appends to it.
func (s *Service) liveSignIn(ctx context.Context, tx uow.Tx, secret []byte, hash string, lock bool) (string, string, signInLinks, error) {
	email, ok, err := s.Views.SignInCode(ctx, tx, hash)
	if err != nil {
		return "", "", signInLinks{}, err
	}
	if !ok {
		return "", "", signInLinks{}, fmt.Errorf("%w: unknown sign-in code", ErrInvalidCode)
	}
	stream := signInStream(secret, email)
	if lock {
		if err := s.Events.Lock(ctx, tx, stream); err != nil {
			return "", "", signInLinks{}, err
		}
	}
	links, err := s.loadSignInLinks(ctx, tx, stream)
	if err != nil {
		return "", "", signInLinks{}, err
	}
	if err := links.use(hash, tx.Now()); err != nil {
		return "", "", signInLinks{}, err
	}
	return email, stream, links, nil
}
