// Package outbox keeps side effects beside the changes that cause them,
// and delivers them at least once.
//
// A command adds a [Message] to a [Store] in the same [uow.Tx] as its
// change, so the message exists exactly when the change does. A relay
// (package relay, below this one) claims due messages, hands each to the
// [Handler] of its topic, and acknowledges it, retries it after
// [Backoff], or buries it: keeps it, undelivered, for an operator (a dead
// letter). A handler's error that wraps [ErrPermanent] buries its message
// at once; one that wraps [ErrUnreachable] says its destination is down.
//
// This package is the contract between the three: what a command adds,
// what a store keeps and how it is fenced ([Lease], [Scope], [Origin],
// [Handover]), what a handler is, and the relay's settings
// ([RelayConfig]). It runs nothing and imports no message library, so a
// domain package that adds messages or writes handlers depends on no
// Watermill; the relay, which runs on Watermill, lives in package relay.
//
// A message keeps the [Origin] of the unit of work that added it: the
// request's trace context and request ID, which the relay's delivery
// joins and its log lines name.
//
// The package knows no SQL: each backend implements [RelayStore],
// [Operator] and [Purger] and runs the suite in outboxtest.
package outbox
