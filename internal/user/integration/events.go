package integration

import "github.com/google/uuid"

// Event is the data of an integration event, as the CloudEvent's data in
// JSON. Its Go type names its CloudEvents type.
type Event interface {
	// Type returns the event's CloudEvents type, one of [Types].
	Type() string
	// Subject returns what the event is about, its CloudEvents subject:
	// the user's ID.
	Subject() string
}

// Every event names its type.
var (
	_ Event = Registered{}
	_ Event = SignedIn{}
	_ Event = EmailChanged{}
	_ Event = Deleted{}
)

// Registered is the data of [TypeRegistered]: a first sign-in created the
// account. The [SignedIn] of the same sign-in follows it.
type Registered struct {
	UserID uuid.UUID `json:"user_id"`
	// Email is the address the account was created for, normalised.
	Email string `json:"email"`
	// Version is the account stream's version after the change: a
	// consumer that has seen a higher one for this user has seen a later
	// change, and one that sees a gap has missed one. Every event has it.
	Version int64 `json:"version"`
}

// Type returns [TypeRegistered].
func (Registered) Type() string { return TypeRegistered }

// Subject returns the user's ID.
func (e Registered) Subject() string { return e.UserID.String() }

// SignedIn is the data of [TypeSignedIn]: a session started.
type SignedIn struct {
	UserID  uuid.UUID `json:"user_id"`
	Version int64     `json:"version"`
}

// Type returns [TypeSignedIn].
func (SignedIn) Type() string { return TypeSignedIn }

// Subject returns the user's ID.
func (e SignedIn) Subject() string { return e.UserID.String() }

// EmailChanged is the data of [TypeEmailChanged]: the account's address is
// now Email.
type EmailChanged struct {
	UserID uuid.UUID `json:"user_id"`
	// Email is the account's address after the change.
	Email   string `json:"email"`
	Version int64  `json:"version"`
}

// Type returns [TypeEmailChanged].
func (EmailChanged) Type() string { return TypeEmailChanged }

// Subject returns the user's ID.
func (e EmailChanged) Subject() string { return e.UserID.String() }

// Deleted is the data of [TypeDeleted]: the account was erased. Its events
// not yet published were dropped with it, so it may come with no
// [Registered] before it.
type Deleted struct {
	UserID  uuid.UUID `json:"user_id"`
	Version int64     `json:"version"`
}

// Type returns [TypeDeleted].
func (Deleted) Type() string { return TypeDeleted }

// Subject returns the user's ID.
func (e Deleted) Subject() string { return e.UserID.String() }
