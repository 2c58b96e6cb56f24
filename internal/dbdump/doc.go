// Package dbdump lists every row of every table of a database, for the
// tests that prove what a database holds, or no longer holds, after a
// command: that an erasure left no address behind, that a refused command
// changed nothing. It is for tests only; the service never imports it.
//
// [Postgres] reads the base tables of the connection's current schema,
// [SQLite] every table of a database file, sqlite_sequence and the like
// included, opened read-only beside the connections of the code under
// test. Each returns the tables in the byte order of their names, and the
// rows of a table in the byte order of their values' text, column by
// column, so that two dumps of the same data are equal.
//
// Every value is rendered as text, whole and unescaped, so that a search
// for an address finds it in any column: PostgreSQL's text form of the
// value (jsonb as its JSON, uuid and timestamptz as the server prints
// them), the bytes themselves of a bytea or BLOB, the text of a SQLite
// value, and [Null] for a NULL.
package dbdump
