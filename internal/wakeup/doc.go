// Package wakeup fans wake-ups out to channels that coalesce them.
//
// A [Fanout] wakes every [Subscription] without blocking; a subscription's
// channel holds at most one wake-up and is closed when its context ends.
// The backends use it for the Wakeups of their outbox stores: it tells the
// relays of their process that a unit of work committed outbox messages.
package wakeup
