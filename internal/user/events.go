package user

import (
	"github.com/eventsourced/accounts/internal/eventstore"
)

// events names every event type of the domain once, with its Go type, its
// schema version and the upcasters of its older versions. Each type's
// category is a kind of stream: "signin" for the sign-in streams, "user"
// for the accounts' ([personal.go]). The folds of the aggregates and the
// projections decode events through it, and handle every type of the
// categories they follow.
var events = registerEvents()

func registerEvents() *eventstore.Registry {
	r := eventstore.NewRegistry()
	eventstore.Register[SignInLinkRequested](r, TypeSignInLinkRequested, upcastSignInLinkRequestedV1)
	eventstore.Register[SignInLinkUsed](r, TypeSignInLinkUsed)
	eventstore.Register[SignInForgotten](r, TypeSignInForgotten)
	eventstore.Register[Registered](r, TypeRegistered)
	eventstore.Register[SessionStarted](r, TypeSessionStarted, upcastSessionV1)
	eventstore.Register[SessionEnded](r, TypeSessionEnded, upcastSessionV1)
	eventstore.Register[EmailChangeRequested](r, TypeEmailChangeRequested)
	eventstore.Register[EmailChanged](r, TypeEmailChanged)
	eventstore.Register[EmailChangeUndone](r, TypeEmailChangeUndone)
	eventstore.Register[Erased](r, TypeErased)
	return r
}

// The categories of the domain's event types, and of its streams.
const (
	CategorySignIn = "signin"
	CategoryUser   = "user"
)

// Events returns the registry of the domain's event types. It is read
// only: registering more in it is a bug.
func Events() *eventstore.Registry { return events }

// Decode returns the data of e, one of the domain's events, upcast to its
// type's current version, as a T.
func Decode[T any](e eventstore.Event) (T, error) { return eventstore.Decode[T](events, e) }
