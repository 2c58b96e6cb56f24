// Package user is the account domain: passwordless sign-in by emailed link,
// sessions, and change of address confirmed by a link sent to the new one.
//
// It is event-sourced. Two kinds of stream hold its facts: "signin-HASH"
// has the sign-in links sent to one address, so that an address can be
// limited and its codes used once whether or not it has an account, and
// "user-ID" has one account. Each command is one unit of work: it loads the
// streams it needs, decides, appends events with optimistic concurrency,
// updates the inline [Views], and adds the outbox messages for its mail.
// A query, which changes nothing, is a read-only unit of work
// ([uow.Runner.Read]).
package user

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/integration"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// Errors of the commands, checked with errors.Is.
var (
	// ErrInvalidCode is an unknown, used or expired one-time code.
	ErrInvalidCode = errors.New("user: invalid code")
	// ErrUnauthenticated is a missing, unknown, ended or expired session.
	ErrUnauthenticated = errors.New("user: not signed in")
	// ErrEmailTaken is an address another account holds, or the user's own.
	ErrEmailTaken = errors.New("user: address taken")
	// ErrTooManyRequests is an address that asked for too many links; the
	// error is a [*TooManyRequestsError].
	ErrTooManyRequests = errors.New("user: too many requests")
)

// TooManyRequestsError says how long an address must wait for its next link.
type TooManyRequestsError struct {
	RetryAfter time.Duration
}

func (e *TooManyRequestsError) Error() string {
	return fmt.Sprintf("user: too many links asked for; retry after %s", e.RetryAfter.Round(time.Second))
}

// Is makes errors.Is(err, ErrTooManyRequests) true.
func (e *TooManyRequestsError) Is(target error) bool { return target == ErrTooManyRequests }

// Policy holds the limits of the domain. Zero fields take the defaults shown.
type Policy struct {
	LinkTTL    time.Duration `env:"LINK_TTL" envDefault:"15m" desc:"How long a sign-in or confirmation link works."`
	SessionTTL time.Duration `env:"SESSION_TTL" envDefault:"720h" desc:"How long a session lasts."`
	LinkLimit  int           `env:"LINK_LIMIT" envDefault:"5" desc:"Sign-in links one address, or email changes one user, may ask for within LINK_WINDOW."`
	LinkWindow time.Duration `env:"LINK_WINDOW" envDefault:"15m" desc:"The window LINK_LIMIT counts in."`
}

// WithDefaults returns p with each zero field set to its default.
func (p Policy) WithDefaults() Policy {
	if p.LinkTTL == 0 {
		p.LinkTTL = 15 * time.Minute
	}
	if p.SessionTTL == 0 {
		p.SessionTTL = 30 * 24 * time.Hour
	}
	if p.LinkLimit == 0 {
		p.LinkLimit = 5
	}
	if p.LinkWindow == 0 {
		p.LinkWindow = 15 * time.Minute
	}
	return p
}

// Validate reports values that cannot work, by their variable names.
func (p Policy) Validate() error {
	var errs []error
	if p.LinkTTL <= 0 {
		errs = append(errs, fmt.Errorf("LINK_TTL must be positive, got %s", p.LinkTTL))
	}
	if p.SessionTTL <= 0 {
		errs = append(errs, fmt.Errorf("SESSION_TTL must be positive, got %s", p.SessionTTL))
	}
	if p.LinkLimit < 1 {
		errs = append(errs, fmt.Errorf("LINK_LIMIT must be at least 1, got %d", p.LinkLimit))
	}
	if p.LinkWindow <= 0 {
		errs = append(errs, fmt.Errorf("LINK_WINDOW must be positive, got %s", p.LinkWindow))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("user: invalid policy: %w", err)
	}
	return nil
}

// User is an account as the API shows it.
type User struct {
	ID        uuid.UUID
	Email     string
	CreatedAt time.Time
}

// Session is a signed-in session. Token is the bearer token; only its hash
// is stored.
type Session struct {
	Token     string
	ExpiresAt time.Time
	User      User
}

// Deps are what a [Service] works with.
type Deps struct {
	Runner uow.Runner
	Events eventstore.Store
	Outbox Outbox
	Views  Views
	// Keys seals the addresses in events (personal.go) and opens them for
	// the views; it is required.
	Keys *keyring.Keyring
}

// Service runs the domain's commands.
type Service struct {
	Deps
	policy      Policy
	baseURL     string
	integration integration.Events
	names       signInNames
	// views applies what the commands append to Views.
	views ViewsProjection
}

// NewService returns a service whose links point at baseURL, such as
// "https://accounts.example.com".
func NewService(d Deps, p Policy, baseURL string, opts ...Option) (*Service, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if d.Keys == nil {
		return nil, errors.New("user: new service: no keyring")
	}
	s := &Service{Deps: d, policy: p, baseURL: baseURL, views: ViewsProjection{Views: d.Views, Keys: d.Keys}}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// maxTries bounds how often a command is run again after it lost a race.
const maxTries = 8

// do runs fn in a unit of work and runs it again, on fresh state, when it
// lost a race with a concurrent command, after a short random pause that
// grows with each try so that the racers spread out.
func (s *Service) do(ctx context.Context, fn func(ctx context.Context, tx uow.Tx) error) error {
	var err error
	for try := range maxTries {
		if try > 0 {
			pause := time.Duration(rand.Int64N(int64(time.Millisecond) << try))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
		}
		err = s.Runner.Do(ctx, withKeys(fn))
		if !errors.Is(err, eventstore.ErrConcurrency) {
			return err
		}
	}
	return fmt.Errorf("user: gave up after %d concurrent changes: %w", maxTries, err)
}

// read runs fn in a read-only unit of work.
func (s *Service) read(ctx context.Context, fn func(ctx context.Context, tx uow.Tx) error) error {
	return s.Runner.Read(ctx, withKeys(fn))
}

// withKeys returns fn run under a context that keeps the keys its unit of
// work reads ([keyring.Within]): a command seals an address, and its views
// open it again, at the cost of one read of the key.
func withKeys(fn func(ctx context.Context, tx uow.Tx) error) func(ctx context.Context, tx uow.Tx) error {
	return func(ctx context.Context, tx uow.Tx) error { return fn(keyring.Within(ctx, tx), tx) }
}

// event returns a new event of type typ with data.
func event(typ string, data any) (eventstore.Event, error) {
	return eventstore.NewEvent(typ, data, eventstore.Metadata{})
}

// appendAndApply appends events to stream at expected, updates the views,
// and returns the events as appended, with their versions.
func (s *Service) appendAndApply(ctx context.Context, tx uow.Tx, stream string, expected eventstore.Expected, events ...eventstore.Event) ([]eventstore.Event, error) {
	appended, err := s.Events.Append(ctx, tx, stream, expected, events...)
	if err != nil {
		return nil, err
	}
	return appended, s.views.Apply(ctx, tx, appended...)
}

// addMail adds the outbox message that mails link to an address.
func (s *Service) addMail(ctx context.Context, tx uow.Tx, topic string, link mail.Link) error {
	m, err := outbox.NewMessage(topic, link, tx.Now())
	if err != nil {
		return err
	}
	return s.Outbox.Add(ctx, tx, m)
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
	return s.do(ctx, func(ctx context.Context, tx uow.Tx) error {
		links, err := s.loadSignInLinks(ctx, tx, stream)
		if err != nil {
			return err
		}
		if wait := links.retryAfter(tx.Now(), s.policy); wait > 0 {
			return &TooManyRequestsError{RetryAfter: wait}
		}
		code, hash := newSecret()
		expires := tx.Now().Add(s.policy.LinkTTL)
		// The key of the address is kept while this link can count or
		// sign in, and forgotten by the sweep after.
		sealed, err := s.sealUntil(ctx, tx, stream, email, tx.Now().Add(s.span()))
		if err != nil {
			return err
		}
		e, err := event(TypeSignInLinkRequested, SignInLinkRequested{Email: sealed, CodeHash: hash, ExpiresAt: expires})
		if err != nil {
			return err
		}
		if _, err := s.appendAndApply(ctx, tx, stream, eventstore.Exactly(links.version), e); err != nil {
			return err
		}
		return s.addMail(ctx, tx, mail.TopicLoginLink, mail.Link{
			To: email, URL: s.baseURL + "/sign-in?code=" + code, Code: code, ExpiresAt: expires,
		})
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
	err = s.do(ctx, func(ctx context.Context, tx uow.Tx) error {
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
			e, err := event(TypeRegistered, Registered{UserID: id, Email: sealed})
			if err != nil {
				return err
			}
			userEvents = append(userEvents, e)
		}
		used, err := event(TypeSignInLinkUsed, SignInLinkUsed{CodeHash: hash, UserID: u.ID})
		if err != nil {
			return err
		}
		if _, err := s.appendAndApply(ctx, tx, stream, eventstore.Exactly(links.version), used); err != nil {
			return err
		}
		token, tokenHash := newSecret()
		expires := tx.Now().Add(s.policy.SessionTTL)
		started, err := event(TypeSessionStarted, SessionStarted{UserID: u.ID, TokenHash: tokenHash, ExpiresAt: expires})
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
			if err := s.publish(ctx, tx, EventRegistered, u.ID, RegisteredData{UserID: u.ID, Email: email, Version: appended[0].Version}); err != nil {
				return err
			}
		}
		last := appended[len(appended)-1]
		if err := s.publish(ctx, tx, EventSignedIn, u.ID, SignedInData{UserID: u.ID, Version: last.Version}); err != nil {
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
// those ([eventstore.Store.LoadSince]): an address asked for often over
// years costs what a new one does.
func (s *Service) loadSignInLinks(ctx context.Context, tx uow.Tx, stream string) (signInLinks, error) {
	events, version, err := s.Events.LoadSince(ctx, tx, stream, s.window(tx))
	if err != nil {
		return signInLinks{}, err
	}
	return foldSignInLinks(events, version)
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
	err = s.read(ctx, func(ctx context.Context, tx uow.Tx) error {
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

// EmailChangeOf returns the address a confirmation code would move its
// account from and the one it would move it to, and uses nothing up, for
// the page a confirmation link opens. It returns [ErrInvalidCode] for a
// code that is unknown, used or expired.
func (s *Service) EmailChangeOf(ctx context.Context, code string) (from, to string, err error) {
	if !validSecret(code) {
		return "", "", fmt.Errorf("%w: malformed", ErrInvalidCode)
	}
	hash := hashSecret(code)
	err = s.read(ctx, func(ctx context.Context, tx uow.Tx) error {
		acct, c, err := s.liveChange(ctx, tx, hash)
		if err != nil {
			return err
		}
		from, to = acct.email, c.newEmail
		return nil
	})
	return from, to, err
}

// loadAccount returns the account of id as a command decides on it. Who
// it is comes from the users view, which each command's own transaction
// keeps; what it asked for lately (its change requests and their codes)
// comes from the tail of its stream: the events of the last LinkWindow or
// LinkTTL, whichever is longer, the only ones that can count against the
// limit or confirm a change ([eventstore.Store.LoadSince]). So a command
// costs the same for an account with years of sign-ins as for a new one.
//
// The tail, and with it the version the command appends at, is read
// first, and the view after it. On PostgreSQL each statement of a unit of
// work sees what committed before it began, so the view then holds at
// least what the version covers; whatever commits later moves the stream
// past the version, and the command's append fails and is tried again.
func (s *Service) loadAccount(ctx context.Context, tx uow.Tx, id uuid.UUID) (account, error) {
	events, version, err := s.Events.LoadSince(ctx, tx, userStream(id), s.window(tx))
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

// window returns the start of the stretch of a stream that decisions need:
// the last LinkWindow or LinkTTL, whichever is longer.
func (s *Service) window(tx uow.Tx) time.Time {
	return tx.Now().Add(-s.span())
}

// span is how long a request for a link matters: the longer of
// LinkWindow, in which it counts against the limit, and LinkTTL, in
// which its link works.
func (s *Service) span() time.Duration { return max(s.policy.LinkWindow, s.policy.LinkTTL) }

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

// sweepMargin is how long after its expiry a row is swept: an instance
// whose clock runs ahead of the others' must not sweep what they still
// take as live.
const sweepMargin = 5 * time.Minute

// sweepBatch bounds the rows of each table that one unit of work of a
// sweep deletes, so that a sweep of a long backlog does not hold SQLite's
// writer, or PostgreSQL's locks, for long.
const sweepBatch = 1000

// Sweep deletes the rows of links and sessions that expired more than a
// few minutes ago (sweepMargin) from the views ([Views.Sweep]), a batch
// per unit of work, and returns how many it deleted. The app runs it every
// SWEEP_INTERVAL, so that the views stay as small as what is live however
// many links are asked for and never used.
func (s *Service) Sweep(ctx context.Context) (int64, error) {
	n, err := s.inBatches(ctx, func(ctx context.Context, tx uow.Tx) (int64, error) {
		return s.Views.Sweep(ctx, tx, tx.Now().Add(-sweepMargin), sweepBatch)
	})
	if err != nil {
		return n, fmt.Errorf("user: sweep: %w", err)
	}
	return n, nil
}

// inBatches runs batch, a unit of work that deletes up to sweepBatch of
// something, until it deletes nothing, and returns how many it deleted.
func (s *Service) inBatches(ctx context.Context, batch func(ctx context.Context, tx uow.Tx) (int64, error)) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.do(ctx, func(ctx context.Context, tx uow.Tx) error {
			var err error
			n, err = batch(ctx, tx)
			return err
		})
		if err != nil {
			return total, err // The batch rolled back: it deleted nothing.
		}
		total += n
		if n == 0 {
			return total, nil
		}
	}
}

// ForgetIdleAddresses forgets the keys of each address that has asked for
// no link for longer than a link can count against its limit or sign in,
// and a few minutes more (sweepMargin), which erases the address wherever
// its sign-in stream holds it; it appends [SignInForgotten] to that stream
// and drops the events before it ([eventstore.Store.Truncate]), which no
// decision needs any more. It returns how many addresses it forgot. The
// app runs it every SWEEP_INTERVAL, so that the log keeps an address that
// only ever asked for a link no longer than that link mattered.
//
// Each address is forgotten in a unit of work of its own, which holds its
// stream ([eventstore.Store.Lock]) as a sign-in and an erasure do, and
// asks again whether the address's keys have all expired: one asked for
// since keeps its stream and its keys, and one asked for while the unit of
// work runs fails the marker's append, which is then tried again.
func (s *Service) ForgetIdleAddresses(ctx context.Context) (int64, error) {
	var total int64
	after := ""
	for {
		var streams []string
		err := s.read(ctx, func(ctx context.Context, tx uow.Tx) error {
			var err error
			streams, err = s.Keys.ExpiredSubjects(ctx, tx, signInPrefix, after, tx.Now().Add(-sweepMargin), sweepBatch)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("user: forget idle addresses: %w", err)
		}
		if len(streams) == 0 {
			return total, nil
		}
		for _, stream := range streams {
			forgot, err := s.forgetIdle(ctx, stream)
			if err != nil {
				return total, fmt.Errorf("user: forget idle addresses: %w", err)
			}
			if forgot {
				total++
			}
		}
		after = streams[len(streams)-1]
	}
}

// ForgetSettledChanges forgets the keys of the changes of address that can
// no longer be confirmed, a few minutes past (sweepMargin), which erases
// the addresses they asked for: those may be other people's, and no
// decision needs them any more. It goes a batch per unit of work and
// returns how many it forgot; the app runs it every SWEEP_INTERVAL.
func (s *Service) ForgetSettledChanges(ctx context.Context) (int64, error) {
	n, err := s.inBatches(ctx, func(ctx context.Context, tx uow.Tx) (int64, error) {
		subjects, err := s.Keys.ExpiredSubjects(ctx, tx, changePrefix, "", tx.Now().Add(-sweepMargin), sweepBatch)
		for _, subject := range subjects {
			if err == nil {
				_, err = s.Keys.Forget(ctx, tx, subject)
			}
		}
		return int64(len(subjects)), err
	})
	if err != nil {
		return n, fmt.Errorf("user: forget settled changes: %w", err)
	}
	return n, nil
}

// forgetIdle forgets the sign-in stream of an idle address, unless a link
// was asked for since its keys expired, and reports whether it did.
func (s *Service) forgetIdle(ctx context.Context, stream string) (bool, error) {
	var forgot bool
	err := s.do(ctx, func(ctx context.Context, tx uow.Tx) error {
		forgot = false
		if err := s.Events.Lock(ctx, tx, stream); err != nil {
			return err
		}
		links, err := s.loadSignInLinks(ctx, tx, stream)
		if err != nil {
			return err
		}
		// Read after the version: a link asked for since has a key
		// that has not expired, or appends past the version.
		idle, err := s.Keys.Expired(ctx, tx, stream, tx.Now().Add(-sweepMargin))
		if err != nil || !idle {
			return err
		}
		if err := s.forgetSignIn(ctx, tx, stream, links); err != nil {
			return err
		}
		forgot = true
		return nil
	})
	return forgot, err
}

// Me returns the user of a session token, or [ErrUnauthenticated]. It
// changes nothing, so it runs in a read-only unit of work, which waits for
// no command, and it reads two rows of the views, whatever the account's
// history.
func (s *Service) Me(ctx context.Context, token string) (User, error) {
	var u User
	err := s.read(ctx, func(ctx context.Context, tx uow.Tx) error {
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
	return s.do(ctx, func(ctx context.Context, tx uow.Tx) error {
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
	return s.do(ctx, func(ctx context.Context, tx uow.Tx) error {
		acct, _, err := s.authenticate(ctx, tx, token)
		if err != nil {
			return err
		}
		if email == acct.email {
			return fmt.Errorf("%w: %s is the user's own address", ErrEmailTaken, email)
		}
		if wait := retryAfter(acct.changeRequests, tx.Now(), s.policy); wait > 0 {
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
		e, err := event(TypeEmailChangeRequested, EmailChangeRequested{
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
// address. It returns [ErrInvalidCode], or [ErrEmailTaken] when another
// account took the address meanwhile.
func (s *Service) ConfirmEmailChange(ctx context.Context, code string) (User, error) {
	if !validSecret(code) {
		return User{}, fmt.Errorf("%w: malformed", ErrInvalidCode)
	}
	hash := hashSecret(code)
	var u User
	err := s.do(ctx, func(ctx context.Context, tx uow.Tx) error {
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
		e, err := event(TypeEmailChanged, EmailChanged{UserID: acct.id, OldEmail: oldSealed, NewEmail: newSealed, CodeHash: hash})
		if err != nil {
			return err
		}
		appended, err := s.appendAndApply(ctx, tx, stream, eventstore.Exactly(acct.version), e)
		if err != nil {
			return err
		}
		if err := s.publish(ctx, tx, EventEmailChanged, acct.id, EmailChangedData{UserID: acct.id, Email: c.newEmail, Version: appended[0].Version}); err != nil {
			return err
		}
		u = User{ID: acct.id, Email: c.newEmail, CreatedAt: acct.createdAt}
		return nil
	})
	return u, err
}
