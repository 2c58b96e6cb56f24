// Package soak runs the service for a long time under faults and checks
// that nothing was lost: several instances of the app binary on a
// PostgreSQL cluster of the soak's own, a nats-server with JetStream and an
// SMTP server that fails now and then, all on loopback; a steady mix of
// sign-ups, sign-ins, changes of address and deletions across the
// instances; one instance killed with SIGKILL and started again every
// [Config.KillEvery], PostgreSQL restarted once.
//
// It keeps a ledger of every request the service accepted and, at the end,
// holds the service to it: every mail asked for arrived (a repeat only with
// the Message-ID of the first), every integration event reached the broker,
// each user's in the order of the changes, and no answer was a 5xx but 503
// with Retry-After while the database was away. Over the run it samples the
// memory of each instance, the outbox's and the events' table sizes and dead
// tuples, and request latency, draws them into an SVG picture, and checks
// that memory and the outbox stay flat after warm-up and that the relay
// drains a burst as fast at the end as at the start.
package soak
