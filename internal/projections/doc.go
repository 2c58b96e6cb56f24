// Package projections keeps read models from events. An inline projection
// is written in the same unit of work as the events it follows; every
// projection can be rebuilt from the event log alone, which is also the
// proof that it holds nothing the events do not.
//
// This package is what a projection is ([Projection], [Rebuildable]), how
// an inline one is rebuilt ([Rebuild]), and what the event log keeps of
// the projections that follow it ([Log]: their progress, failures and
// versions). It imports no message library, so a domain package that
// writes projections depends on no Watermill. The asynchronous
// projections run in package async, on Watermill routers fed by the log.
package projections
