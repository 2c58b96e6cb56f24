// Package bench measures the outbox relay, the HTTP API and the activity
// projection on a database it is given, and prints what it measured; and
// how they hold up beside a database it fills with a long history
// ([Bench.Growth]).
//
// A [Bench] takes the ports it measures as values (a [uow.Runner], an
// [outbox.Store], an [eventstore.Store], an [async.Log]); the caller
// opens the database, preferably one that leaves no trace, and closes it.
// Each benchmark writes its lines to [Bench.Out], its one summary line
// last, in the form the design gives:
//
//	drain: N messages in S, R msgs/s
//	latency: rate=R/s n=N p50=... p90=... p99=... max=...
//	signin: N requests in S, R req/s, p50=... p99=...
//	invite: N rounds in S, R rounds/s, p50=... p99=...
//	projection: N events in S, R events/s
//	projection lag: rate=R/s n=N p50=... p90=... p99=... max=...
//	publish: N messages in S, R msgs/s
//	growth: events=N signin=R.RRx drain=R.RRx rebuild=N ev/s bytes/event=N
//
// A benchmark whose context ends before it is done still prints its
// summary line, with what it measured and "(cut short: ...)", and returns
// a [*CutShortError]; growth, whose figures mean something only side by
// side, returns the context's error and prints no summary.
package bench
