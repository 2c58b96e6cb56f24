// Package eventstoretest is the conformance suite of [eventstore.Store]:
// every backend calls [Run] from a test of its own, so that all of them keep
// the same contract.
package eventstoretest
