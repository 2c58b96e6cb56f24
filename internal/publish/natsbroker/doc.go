// Package natsbroker publishes Watermill messages to a NATS JetStream stream,
// each with its UUID as Nats-Msg-Id so that the stream drops the repeats
// that at-least-once delivery makes.
//
// It is a thin publisher over nats.go's jetstream package rather than
// watermill-nats: that library's JetStream publisher uses nats.go's legacy
// API, whose publish ignores the message's context, so a relay's handler
// timeout would not bound it, and its publisher on the new API does not set
// Nats-Msg-Id.
package natsbroker
