// Package forward delivers integration events: its [Handler] is the
// outbox handler that publishes the CloudEvent a message carries through
// any Watermill message.Publisher, and so knows no broker. JetStream,
// Kafka and a signed webhook are each a publisher of their own package
// beside this one.
//
// The events themselves, and the outbox messages that carry them, are
// package publish's, which a domain uses without Watermill.
package forward
