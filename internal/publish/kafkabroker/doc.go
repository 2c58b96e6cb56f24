// Package kafkabroker publishes Watermill messages to Kafka through franz-go.
//
// A [Publisher] is a thin [message.Publisher]: each message becomes one
// record, keyed by its [MetadataKey] metadata so that one key always lands in
// one partition, in the order it was published. It is meant to sit behind the
// outbox relay, which already delivers at least once, so a consumer
// deduplicates records by their [HeaderID] header.
package kafkabroker
