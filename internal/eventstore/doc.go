// Package eventstore keeps the events of every aggregate in streams, and all
// streams in one log that can be read in one stable order.
//
// A stream is the history of one aggregate, numbered from version 1. Appends
// are optimistic: the caller states the version it decided on ([Any],
// [NoStream] or an exact version), and a stream that moved meanwhile makes
// [Store.Append] return [ErrConcurrency], so the unit of work can be retried
// on fresh state; [Store.AppendLater] may return it from the unit of
// work's next statement or its commit instead, and saves a round trip.
// [Store.AppendLaterIf] saves the load too, for a decision that holds
// whenever the stream has few enough recent events: it states that
// presumption as a [Condition] instead of a version, and fails the same
// way when it is wrong.
// The log is what projections follow: [Store.ReadAll] returns
// events in one order that never changes once read (the order of their
// transactions, then of the events within them), and never passes over an
// event whose transaction was still in flight. That order is the commit
// order where writers are serialised (SQLite); on PostgreSQL it is the order
// in which transactions took their IDs, which two transactions that overlap
// may commit in reverse. Events of one stream always keep their versions'
// order.
package eventstore
