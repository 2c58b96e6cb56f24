package user

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/aggregate"
	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/publish"
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
	// tp and mp are the providers of [WithTracerProvider] and
	// [WithMeterProvider].
	tp trace.TracerProvider
	mp metric.MeterProvider
	// commands runs each command in its unit of work, span and metrics.
	commands *aggregate.Commands
	// erasureHooks are the hooks of [WithErasure], in order.
	erasureHooks []func(ctx context.Context, tx uow.Tx, u User) error
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
	commands, err := aggregate.NewCommands(aggregate.CommandsConfig{
		Domain: "user", Instrumentation: instrumentation, Runner: d.Runner, Refusals: refusals,
		Within: keyring.Within, TracerProvider: s.tp, MeterProvider: s.mp,
	})
	if err != nil {
		return nil, fmt.Errorf("user: new service: %w", err)
	}
	s.commands = commands
	return s, nil
}

// event returns a new event of data, whose Go type names its type in
// the domain's registry, with the metadata of the command ctx runs
// ([aggregate.Metadata]).
func event(ctx context.Context, data any) (eventstore.Event, error) {
	return events.New(data, aggregate.Metadata(ctx))
}

// appendAndApply appends events to stream at expected, updates the views,
// and returns the events as appended, with their versions. The append may
// reach the database only with the unit of work's next statement or its
// commit ([eventstore.Store.AppendLater]): a race it loses then fails the
// unit of work, which [aggregate.Commands.Do] runs again as it does any lost race.
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

// loadTail returns the recent stretch of stream from [Service.window]
// and the stream's version ([eventstore.Store.LoadSince]): an append at
// that version still checks the whole stream.
func (s *Service) loadTail(ctx context.Context, tx uow.Tx, stream string) ([]eventstore.Event, int64, error) {
	return s.Events.LoadSince(ctx, tx, stream, s.window(tx))
}

// span is how long a request for a link matters: the longer of
// LinkWindow, in which it counts against the limit, and LinkTTL, in
// which its link works.
func (s *Service) span() time.Duration { return max(s.policy.LinkWindow, s.policy.LinkTTL) }
