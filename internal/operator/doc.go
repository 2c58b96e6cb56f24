// Package operator does the work of the operators' commands: inspecting,
// requeuing and discarding the outbox's messages, draining it once,
// rewrapping the data keys, and rebuilding projections or saying where
// each stands.
//
// [Outbox] and [Projections] hold the ports they work on as values (an
// [outbox.Operator], an [async.Log]), and [RotateKeys] takes a
// [uow.Runner] and a [*keyring.Keyring]; each writes what it did, as a
// table or JSON lines, to the writer it is given. It
// opens nothing and reads no configuration: the command line does that.
// What it prints of a message's payload has its secrets redacted.
package operator
