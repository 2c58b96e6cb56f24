// Package webhook delivers Watermill messages to one HTTP endpoint, each as a
// POST signed to the Standard Webhooks specification
// (https://www.standardwebhooks.com) with the official Go library.
//
// A receiver verifies a delivery from its webhook-id, webhook-timestamp and
// webhook-signature headers and the body byte for byte. The webhook-id is the
// message's UUID, the same on every retry, so the receiver can use it as an
// idempotency key; the timestamp is taken afresh on every attempt, so a retry
// long after the first try is not refused as a replay.
package webhook
