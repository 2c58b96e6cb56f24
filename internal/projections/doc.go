// Package projections keeps read models from events. An inline projection
// is written in the same unit of work as the events it follows; every
// projection can be rebuilt from the event log alone, which is also the
// proof that it holds nothing the events do not.
package projections
