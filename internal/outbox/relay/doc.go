// Package relay delivers the messages of an [outbox.RelayStore] at least
// once, on a Watermill router: a [Relay] claims due messages, hands each
// to the [outbox.Handler] of its topic, and acknowledges it, retries it
// after [outbox.Backoff], or buries it (a dead letter).
//
// The relay promises:
//
//   - At least once. A message is removed only after its handler returned
//     nil; a relay that dies mid-delivery leaves it to be claimed again.
//     A handler must make a repeat harmless; the message ID is the tool.
//   - Leases and fencing. A claim leases a message for
//     [outbox.RelayConfig.Lease] and counts an attempt; the [outbox.Lease]
//     fences every settlement, so a relay that lost its claim changes
//     nothing, whatever its clock says. No message runs twice at once
//     while its lease holds.
//   - Order per key. Messages of one [outbox.Message.Key] are delivered
//     one at a time, in the order they were added.
//   - Only what it can deliver. A relay claims the messages of the topics
//     it has a handler for, and leaves the others alone, due, for a relay
//     that has theirs.
//   - Bounded retries. A message is buried once its topic's [RetryPolicy]
//     is spent, or when it keeps being claimed without finishing; while
//     every delivery of a topic fails, or once its destination cannot be
//     reached at all ([outbox.ErrUnreachable]), a circuit breaker stops
//     claiming it.
//   - A clean stop. [Relay.Run] returns after its context ends, once the
//     deliveries in flight are settled or the grace of [WithStopGrace] has
//     run out; what was claimed and not delivered is released, its attempt
//     given back.
//
// [Relay.Run] is a Watermill router with a consumer handler per topic. Its
// subscriber claims from the store and hands each message out with its
// attempt and lease in the metadata; the router acks or nacks it after its
// handler, and the subscriber turns that into the store's settlement under
// the lease. What is generic (a span per delivery, the failure reason,
// timing, panic recovery, the timeout) is router middleware. A message
// added in the relay's own process it may take instead of claiming it,
// stored already leased to it and handed out once its unit of work
// commits ([outbox.Handover]); the promises above hold for it all the
// same.
//
// A message's first delivery is a child span in the trace of the request
// that added it ([outbox.Origin]); a retry starts a new trace linked to
// it, since a retry may run hours later and a trace that long breaks tail
// sampling and trace views. The relay's log lines about the message name
// its request_id.
//
// The types' doc comments say each of these in full.
package relay
