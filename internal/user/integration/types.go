package integration

import "strings"

// Namespace begins the type of every integration event: the reverse-DNS
// name of the service that publishes them.
const Namespace = "com.github.eventsourced.accounts"

// The types of the integration events: the CloudEvents type of each. The
// data of each is the Go type named after it ([Registered] for
// [TypeRegistered]), described by the schema named after it under
// schemas/.
const (
	// TypeRegistered: a first sign-in created the account ([Registered]).
	TypeRegistered = Namespace + ".user.registered.v1"
	// TypeSignedIn: a session started, the first one included
	// ([SignedIn]).
	TypeSignedIn = Namespace + ".user.signed_in.v1"
	// TypeEmailChanged: the account's address changed, confirmed by its
	// owner or undone by the link mailed to the address it left
	// ([EmailChanged]).
	TypeEmailChanged = Namespace + ".user.email_changed.v1"
	// TypeDeleted: the account was erased at its owner's request; a
	// consumer deletes what it holds of the user ([Deleted]).
	TypeDeleted = Namespace + ".user.deleted.v1"
)

// Types returns the type of every integration event published today.
func Types() []string {
	return []string{TypeRegistered, TypeSignedIn, TypeEmailChanged, TypeDeleted}
}

// Legacy returns the types that events were published under before they
// were namespaced and versioned, each with the type that replaced it,
// whose data is the same. Events of these types are no longer made, but
// those already in the outbox at the upgrade are delivered as they were
// stored, so a relay keeps a handler for each.
func Legacy() map[string]string {
	return map[string]string{
		"user.registered":    TypeRegistered,
		"user.signed_in":     TypeSignedIn,
		"user.email_changed": TypeEmailChanged,
		"user.deleted":       TypeDeleted,
	}
}

// Route returns the name that events of type typ are routed by on a
// broker, after BROKER_SUBJECT_PREFIX: the end of the NATS subject, and up
// to its first dot the Kafka topic's. It is the type without [Namespace]
// and the version, "user.registered" for [TypeRegistered], and a type of
// [Legacy] as it is: every version of an event, the legacy one included,
// goes where its consumers already subscribe.
func Route(typ string) string {
	name, ok := strings.CutPrefix(typ, Namespace+".")
	if !ok {
		return typ
	}
	if i := strings.LastIndex(name, ".v"); i > 0 && isNumber(name[i+2:]) {
		name = name[:i]
	}
	return name
}

// isNumber reports whether s is one or more decimal digits.
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
