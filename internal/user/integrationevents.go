package user

import (
	"context"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/uow"
)

// Integration event types: the CloudEvents other systems hear about, when a
// destination is configured ([WithIntegrationEvents]). Each is published
// with the user's ID as its subject and data of the struct named after it.
// They are a public contract, described by the JSON Schemas under schemas/
// in the repository: a change to them is a new type, not an edit.
const (
	// EventRegistered: a first sign-in created the account.
	EventRegistered = "user.registered"
	// EventSignedIn: a session started, the first one included.
	EventSignedIn = "user.signed_in"
	// EventEmailChanged: the user confirmed a new address.
	EventEmailChanged = "user.email_changed"
	// EventDeleted: the account was deleted; a consumer deletes what it
	// holds of the user.
	EventDeleted = "user.deleted"
)

// IntegrationEvents returns every integration event type.
func IntegrationEvents() []string {
	return []string{EventRegistered, EventSignedIn, EventEmailChanged, EventDeleted}
}

// RegisteredData is the data of [EventRegistered].
type RegisteredData struct {
	UserID uuid.UUID `json:"user_id"`
	// Email is the address the account was created for.
	Email string `json:"email"`
	// Version is the account stream's version after the change: a
	// consumer that has seen a higher one for this user has seen a later
	// change, and one that sees a gap has missed one.
	Version int64 `json:"version"`
}

// SignedInData is the data of [EventSignedIn].
type SignedInData struct {
	UserID  uuid.UUID `json:"user_id"`
	Version int64     `json:"version"`
}

// EmailChangedData is the data of [EventEmailChanged].
type EmailChangedData struct {
	UserID uuid.UUID `json:"user_id"`
	// Email is the new address.
	Email   string `json:"email"`
	Version int64  `json:"version"`
}

// DeletedData is the data of [EventDeleted].
type DeletedData struct {
	UserID  uuid.UUID `json:"user_id"`
	Version int64     `json:"version"`
}

// WithIntegrationEvents makes the service add the integration events of
// each command to the outbox, in the command's unit of work, for every
// destination of e. Give it only when the relay has a handler for each
// destination's topics ([publish.Topic] of each of
// [IntegrationEvents]); without it no integration event is added.
func WithIntegrationEvents(e publish.Events) Option {
	return func(s *Service) { s.integration = e }
}

// publish adds the integration event of type typ about user id to the
// outbox, for each configured destination.
func (s *Service) publish(ctx context.Context, tx uow.Tx, typ string, id uuid.UUID, data any) error {
	msgs, err := s.integration.Messages(typ, id.String(), data, tx.Now())
	if err != nil || len(msgs) == 0 {
		return err
	}
	return s.Outbox.Add(ctx, tx, msgs...)
}
