package org

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
	"github.com/eventsourced/accounts/internal/user"
)

// Authenticator authenticates a session's bearer token inside a unit of
// work: *user.Service does.
type Authenticator interface {
	// Authenticate returns the account of a live session token, and
	// holds the account's stream ("user-ID", [eventstore.Store.Lock])
	// until tx ends, so that the account's erasure waits for tx and then
	// sees what it wrote. It returns user.ErrUnauthenticated.
	Authenticate(ctx context.Context, tx uow.Tx, token string) (user.User, error)
	// Me returns the account of a live session token, in a read-only
	// unit of work of its own, and holds nothing: for the queries,
	// which change nothing and so need not wait for a command, and for
	// [Service.Invite], which holds another account's stream. It
	// returns user.ErrUnauthenticated.
	Me(ctx context.Context, token string) (user.User, error)
}

// Outbox is where the service adds its invitation mails, and from which
// it deletes those of the invitations that end before they are
// delivered.
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
	// Users authenticates the sessions of the commands.
	Users Authenticator
	// UserViews are the user domain's views, where the service finds the
	// account of an invited address.
	UserViews user.Views
	// Keys seals the invited addresses in events (personal.go) and opens
	// them for the views; it is required.
	Keys *keyring.Keyring
}

// Service runs the domain's commands and queries. Each takes the
// session's bearer token and authenticates it in its own unit of work;
// a missing, ended or expired session is user.ErrUnauthenticated.
//
// A command that adds an account to an organization (Create and Accept)
// races that account's erasure, which takes it out of every organization
// it is in ([Service.Erased]): the authentication holds the account's
// stream until the command's unit of work ends, and the erasure holds it
// too before it reads the account's memberships, so that either the
// command commits first and the erasure finds the membership, or the
// erasure commits first and the command finds no session.
type Service struct {
	Deps
	policy  Policy
	baseURL string
	// views applies what the commands append to Views.
	views ViewsProjection
	// integration adds the integration events of the commands to the
	// outbox ([WithIntegrationEvents]); the zero value adds none.
	integration publish.Events
	// tp and mp are the providers of [WithTracerProvider] and
	// [WithMeterProvider].
	tp trace.TracerProvider
	mp metric.MeterProvider
	// commands runs each command in its unit of work, span and metrics.
	commands *aggregate.Commands
}

// Option configures a [Service].
type Option func(*Service)

// NewService returns a service whose invitation links point at baseURL,
// such as "https://accounts.example.com".
func NewService(d Deps, p Policy, baseURL string, opts ...Option) (*Service, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	switch {
	case d.Keys == nil:
		return nil, errors.New("org: new service: no keyring")
	case d.Users == nil || d.UserViews == nil:
		return nil, errors.New("org: new service: no user service or user views")
	}
	s := &Service{Deps: d, policy: p, baseURL: baseURL, views: ViewsProjection{Views: d.Views, Keys: d.Keys}}
	for _, o := range opts {
		o(s)
	}
	commands, err := aggregate.NewCommands(aggregate.CommandsConfig{
		Domain: "org", Instrumentation: instrumentation, Runner: d.Runner, Refusals: refusals,
		Within: keyring.Within, TracerProvider: s.tp, MeterProvider: s.mp,
	})
	if err != nil {
		return nil, fmt.Errorf("org: new service: %w", err)
	}
	s.commands = commands
	return s, nil
}

// load returns the state of the organization id, from its whole stream.
func (s *Service) load(ctx context.Context, tx uow.Tx, id uuid.UUID) (organization, error) {
	events, err := s.Events.Load(ctx, tx, streamOf(id), 0)
	if err != nil {
		return organization{}, err
	}
	return foldOrganization(id, events)
}

// apply appends the events of data to the stream of o at the version it
// was loaded at, updates the views, ends the invitations the events end
// (it forgets their keys, which erases their addresses from the log, and
// deletes their mail if it is still in the outbox: its message's ID is
// the invitation's), and adds the integration events of the events to the
// outbox ([WithIntegrationEvents]). It returns the events as appended. The append
// may reach the database only with the unit of work's next statement or
// its commit ([eventstore.Store.AppendLater]): a race it loses then fails
// the unit of work, which [aggregate.Commands.Do] runs again.
func (s *Service) apply(ctx context.Context, tx uow.Tx, o organization, data ...any) ([]eventstore.Event, error) {
	if len(data) == 0 {
		return nil, nil
	}
	es := make([]eventstore.Event, len(data))
	var ended []uuid.UUID
	for i, d := range data {
		e, err := events.New(d, aggregate.Metadata(ctx))
		if err != nil {
			return nil, err
		}
		es[i] = e
		switch d := d.(type) {
		case InvitationAccepted:
			ended = append(ended, d.InvitationID)
		case InvitationRevoked:
			ended = append(ended, d.InvitationID)
		case InvitationVoided:
			ended = append(ended, d.InvitationID)
		}
	}
	appended, err := s.Events.AppendLater(ctx, tx, streamOf(o.id), eventstore.Exactly(o.version), es...)
	if err != nil {
		return nil, err
	}
	if err := s.views.Apply(ctx, tx, appended...); err != nil {
		return nil, err
	}
	for _, id := range ended {
		if _, err := s.Keys.Forget(ctx, tx, invitationSubject(id)); err != nil {
			return nil, err
		}
	}
	if len(ended) > 0 {
		if _, err := s.Outbox.Delete(ctx, tx, ended, nil); err != nil {
			return nil, err
		}
	}
	if err := s.publish(ctx, tx, o.id, appended, data); err != nil {
		return nil, err
	}
	return appended, nil
}

// decideAs runs the command name on the organization id for the account
// of token: it authenticates the token in the unit of work, checks that
// the account is a member ([Service.memberOf]), loads and folds the
// stream, decides with decide, given the account and the unit of work's
// time, and appends what it decided with what follows from it.
func (s *Service) decideAs(ctx context.Context, name, token string, id uuid.UUID, decide func(o organization, by uuid.UUID, now time.Time) ([]any, error)) error {
	return s.commands.Do(ctx, name, func(ctx context.Context, tx uow.Tx) error {
		u, err := s.Users.Authenticate(ctx, tx, token)
		if err != nil {
			return err
		}
		if err := s.memberOf(ctx, tx, id, u.ID); err != nil {
			return err
		}
		o, err := s.load(ctx, tx, id)
		if err != nil {
			return err
		}
		data, err := decide(o, u.ID, tx.Now())
		if err != nil {
			return err
		}
		_, err = s.apply(ctx, tx, o, data...)
		return err
	})
}
