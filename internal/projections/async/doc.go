// Package async keeps asynchronous projections: each follows the event
// log through a watermill-sql subscriber of its own consumer group
// ([projections.Group]), as a handler of a Watermill router, and its
// writes commit with its offset ([Log]).
//
// A [Runner] keeps the projections of a process at the versions the log's
// registry names, and marks one that cannot apply an event failed rather
// than skip it; [Renew] rebuilds a [projections.Rebuildable] projection
// blue/green, beside the version that serves reads. [Batches],
// [WakeBackoff] and [StopWakeups] are what a backend's [Log] is built
// from; logtest is the suite every backend's Log runs.
package async
