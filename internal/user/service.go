package user

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// Errors of the commands, checked with errors.Is.
var (
	// ErrInvalidCode is an unknown, used, expired or voided one-time code.
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

// Outbox is where the service adds its mails and integration events, and
// from which it deletes a person's messages when it erases them.
type Outbox interface {
	outbox.Store
	outbox.Purger
}

// Deps are what a [Service] works with.
type Deps struct {
	Runner uow.Runner
	Events eventstore.Store
	Outbox Outbox
	// Views are the tables the service's [ViewsProjection] writes, in
	// each command's unit of work, and the queries it makes of them.
	Views Views
	// Keys seals the addresses in events (personal.go) and opens them for
	// the views; it is required.
	Keys *keyring.Keyring
}

// Service runs the domain's commands.
type Service struct {
	Deps
	policy      Policy
	baseURL     string
	integration publish.Events
	// names holds the secret that names sign-in streams.
	names *keyring.Names
	// views applies what the commands append to Views.
	views ViewsProjection
	// tp is the provider of [WithTracerProvider], tr its tracer.
	tp trace.TracerProvider
	tr trace.Tracer
}

// Option configures a [Service].
type Option func(*Service)

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
	s := &Service{Deps: d, policy: p, baseURL: baseURL, views: ViewsProjection{Views: d.Views, Keys: d.Keys},
		names: keyring.NewNames(d.Keys, d.Runner, signInNamesSubject)}
	for _, o := range opts {
		o(s)
	}
	s.tr = s.tracer()
	return s, nil
}

// maxTries bounds how often a command is run again after it lost a race.
const maxTries = 8

// do runs fn, the command name, in a unit of work and runs it again, on
// fresh state, when it lost a race with a concurrent command, after a
// short random pause that grows with each try so that the racers spread
// out. The command is one span, named name, with an event for each lost
// race and the number of tries.
func (s *Service) do(ctx context.Context, name string, fn func(ctx context.Context, tx uow.Tx) error) error {
	ctx, span := s.startCommand(ctx, name)
	defer endOnPanic(span)
	tries, err := s.tries(ctx, span, 0, fn)
	span.SetAttributes(attrTries.Int(tries))
	endCommand(span, err)
	return err
}

// doPresuming runs the command name as [Service.do] does, but tries first
// presumed, a unit of work that decides without loading its stream, on a
// presumption about the stream's recent events, and appends under that
// condition ([eventstore.Store.AppendLaterIf]). It saves a round trip to
// the database when the presumption holds; when it does not, the append
// fails with ErrConcurrency and fn, which loads the stream, runs as do
// runs it, at once, the command's span marking the failed presumption.
func (s *Service) doPresuming(ctx context.Context, name string, presumed, fn func(ctx context.Context, tx uow.Tx) error) error {
	ctx, span := s.startCommand(ctx, name)
	defer endOnPanic(span)
	err := s.Runner.Do(ctx, withKeys(presumed))
	tries := 1
	if errors.Is(err, eventstore.ErrConcurrency) {
		span.AddEvent(eventConditionFailed)
		tries, err = s.tries(ctx, span, 1, fn)
	}
	span.SetAttributes(attrTries.Int(tries))
	endCommand(span, err)
	return err
}

// tries runs fn as [Service.do] describes, for a command that has run
// before times already, and returns how often it ran in all.
func (s *Service) tries(ctx context.Context, span trace.Span, before int, fn func(ctx context.Context, tx uow.Tx) error) (int, error) {
	var err error
	for try := range maxTries {
		if try > 0 {
			lostRace(span, before+try)
			pause := time.Duration(rand.Int64N(int64(time.Millisecond) << try))
			select {
			case <-ctx.Done():
				return before + try, ctx.Err()
			case <-time.After(pause):
			}
		}
		err = s.Runner.Do(ctx, withKeys(fn))
		if !errors.Is(err, eventstore.ErrConcurrency) {
			return before + try + 1, err
		}
	}
	lostRace(span, before+maxTries)
	return before + maxTries, fmt.Errorf("user: gave up after %d concurrent changes: %w", maxTries, err)
}

// read runs fn, the query name, in a read-only unit of work, as one span
// named name.
func (s *Service) read(ctx context.Context, name string, fn func(ctx context.Context, tx uow.Tx) error) error {
	ctx, span := s.startCommand(ctx, name)
	defer endOnPanic(span)
	err := s.Runner.Read(ctx, withKeys(fn))
	endCommand(span, err)
	return err
}

// withKeys returns fn run under a context that keeps the keys its unit of
// work reads ([keyring.Within]): a command seals an address, and its views
// open it again, at the cost of one read of the key.
func withKeys(fn func(ctx context.Context, tx uow.Tx) error) func(ctx context.Context, tx uow.Tx) error {
	return func(ctx context.Context, tx uow.Tx) error { return fn(keyring.Within(ctx, tx), tx) }
}

// event returns a new event of data, whose Go type names its type in
// the domain's registry. Its metadata names the request that caused it
// (its correlation: the request ID, which the outbox's messages of the
// same unit of work carry too, in their origin) and the command that
// appended it (its causation), as ctx gives them.
func event(ctx context.Context, data any) (eventstore.Event, error) {
	return events.New(data, eventstore.Metadata{CorrelationID: requestid.From(ctx), CausationID: commandOf(ctx)})
}

// commandKey keys the name of the command a context runs.
type commandKey struct{}

// withCommand returns ctx running the command name ([Service.do]).
func withCommand(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, commandKey{}, name)
}

// commandOf returns the name of the command ctx runs, "" outside one.
func commandOf(ctx context.Context) string {
	name, _ := ctx.Value(commandKey{}).(string)
	return name
}

// appendAndApply appends events to stream at expected, updates the views,
// and returns the events as appended, with their versions. The append may
// reach the database only with the unit of work's next statement or its
// commit ([eventstore.Store.AppendLater]): a race it loses then fails the
// unit of work, which [Service.do] runs again as it does any lost race.
func (s *Service) appendAndApply(ctx context.Context, tx uow.Tx, stream string, expected eventstore.Expected, events ...eventstore.Event) ([]eventstore.Event, error) {
	appended, err := s.Events.AppendLater(ctx, tx, stream, expected, events...)
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

// window returns the start of the stretch of a stream that decisions need:
// the last LinkWindow or LinkTTL, whichever is longer.
func (s *Service) window(tx uow.Tx) time.Time {
	return tx.Now().Add(-s.span())
}

// loadTail returns the events of stream from the first one recorded within
// [Service.window], and the stream's version. An event's time comes from
// the clock of the unit of work that wrote it, so a later event can carry
// an earlier time than the one before it ([eventstore.Store.LoadSince])
// and be left out while that one is in: the use of a code, or the
// confirmation that voided it, would then be missed. So when the recent
// events are not the whole stream from the first of them, the rest is
// loaded too.
func (s *Service) loadTail(ctx context.Context, tx uow.Tx, stream string) ([]eventstore.Event, int64, error) {
	events, version, err := s.Events.LoadSince(ctx, tx, stream, s.window(tx))
	if err != nil || len(events) == 0 {
		return events, version, err
	}
	first := events[0].Version
	if int64(len(events)) == version-first+1 {
		return events, version, nil
	}
	all, err := s.Events.Load(ctx, tx, stream, first)
	if err != nil {
		return nil, 0, err
	}
	// Events appended since LoadSince read the version fail the append.
	for len(all) > 0 && all[len(all)-1].Version > version {
		all = all[:len(all)-1]
	}
	return all, version, nil
}

// span is how long a request for a link matters: the longer of
// LinkWindow, in which it counts against the limit, and LinkTTL, in
// which its link works.
func (s *Service) span() time.Duration { return max(s.policy.LinkWindow, s.policy.LinkTTL) }
