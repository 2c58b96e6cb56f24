// Package integration states the public contract of the account service's
// integration events: the facts other systems hear about, as CloudEvents
// 1.0, when a destination is configured. It names each event's type and
// gives its data a Go type; the JSON Schemas under schemas/ in the
// repository describe the same events for consumers, and tests hold the
// two together.
//
// Integration events are not the domain's events. A domain event (such as
// user.Registered, of type "user.registered") is a fact in an account's
// stream, stored forever, and may hold what only the service may read: a
// sealed address, the hash of a code. An integration event is what the
// service tells the world about such facts, and changes on its own terms:
// it is made from domain events by one function per integration event, in
// package user. So the two never share a name: every integration event's
// type begins with [Namespace], the reverse-DNS name of its publisher, as
// the CloudEvents spec recommends, and ends with its version
// ([TypeRegistered] is "com.github.eventsourced.accounts.user.registered.v1").
//
// The contract of a type does not change. Its schema admits no field it
// does not name, so any change to its data (a field added, removed,
// renamed or given another meaning) is a new version: a type of its own,
// with a schema of its own.
//
// On a broker an event is routed by [Route]: its type without the
// namespace and the version, so that a consumer's subscription holds
// across versions and the type tells them apart.
//
// Events were first published under the types that [Legacy] lists. Those
// added to the outbox before the types were renamed are delivered after
// the upgrade as they were stored, under their old types, to the same
// subjects and topics as the new ones: a consumer tells old from new by
// the type, and reads the data of both alike.
package integration
