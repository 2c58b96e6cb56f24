// Package postgres is the PostgreSQL backend, on pgx/v5: the unit of work,
// the event store, the outbox store, the event log that asynchronous
// projections follow, the user views, the activity projection's tables and
// the keyring's data keys, all over one [DB]. All PostgreSQL SQL of the
// project lives here; the rest of the project knows no SQL dialect.
//
// Driver errors become the project's errors at this edge: a database that
// cannot be reached wraps [uow.ErrUnavailable], a lost race on a stream
// [eventstore.ErrConcurrency], a message that is not there
// [outbox.ErrNotFound]. The stores accept only the transactions of this
// package's [Runner]; any other is [uow.ErrForeignTx].
package postgres
