// Package outboxtest is the conformance suite of an outbox [Store]: the
// relay's, the operators' and the erasure's methods. Every backend runs it
// unchanged, as Watermill's pub/sub test suite and River's driver test
// suite do:
//
//	func TestOutboxStore(t *testing.T) {
//		outboxtest.Run(t, outboxtest.Features{}, func(t *testing.T) outboxtest.Harness {
//			db := pgtest.New(t)
//			return outboxtest.Harness{Runner: db.Runner(nil), Store: db.Outbox()}
//		})
//	}
//
// The suite checks each sentence of the [outbox.Store] contract, with the
// fencing of settlements by an [outbox.Lease] and the narrowing of claims by
// [outbox.Scope], and the relay's methods of [outbox.RelayStore], AckAll,
// Backlog and ClaimWithOrigins with the [outbox.Origin] kept by Add, the
// operators' methods of [outbox.Operator] and the erasure's of
// [outbox.Purger]; it sees the reason kept by [outbox.Store.Retry] through
// Lookup. It never reads the wall clock:
// messages carry fixed creation times and every claim is made at an
// explicit time.
package outboxtest
