// Package uow defines the unit of work: one database transaction in which a
// command loads events, appends new ones, updates inline projections and adds
// outbox messages, so that all of them commit together or not at all. A
// query that changes nothing runs in a read-only unit of work instead, which
// does not queue behind the writers.
//
// Each backend (PostgreSQL, SQLite) implements [Runner] and hands its own
// [Tx] to the function it runs. Stores of one backend accept only that
// backend's Tx; any other Tx is reported as [ErrForeignTx].
package uow
