// Package sqlite is the SQLite backend, on the pure-Go driver
// modernc.org/sqlite (no cgo): the unit of work, the event store, the
// outbox store, the event log that asynchronous projections follow, the
// user views, the activity projection's tables and the keyring's data
// keys, all over one [DB], one database file. All SQLite SQL of the
// project lives here; the rest of the project knows no SQL dialect.
//
// SQLite has one writer at a time. This backend makes that its design
// instead of fighting it: every write (units of work and the relay's
// bookkeeping) goes through one connection, so writers queue in Go rather
// than spin in SQLite's busy handler, and the order in which they commit is
// exactly the order in which they wrote. That is what makes the event log's
// positions commit order, with no horizon of transactions in flight as on
// PostgreSQL. Read-only units of work ([Runner.Read]) and reads that need no
// unit of work (the outbox's backlog and operators' reads, and [DB.Ping])
// use a pool of read-only connections, which WAL mode lets run beside the
// writer. The subscribers of the event log ([DB.Log]) write on a
// connection of their own, in IMMEDIATE transactions, and take turns with
// the writer through SQLite's lock.
//
// Times are stored as INTEGER microseconds since 1970-01-01 UTC, UUIDs as
// TEXT in canonical form and JSON as TEXT that json_valid accepts; see the
// migrations in migrations/sqlite.
package sqlite
