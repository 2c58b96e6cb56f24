// Package publish publishes integration events: the public facts of this
// service that other systems hear about, as CloudEvents 1.0 in structured
// JSON mode.
//
// A command adds the events it causes to the outbox in its own unit of work,
// one message per configured destination ([Events.Messages]), so an event
// exists exactly when its change does. The payload of each message is the
// CloudEvent as it will be sent, its id the message's ID, so every retry
// sends the same bytes and a receiver recognises a repeat by the id. The
// relay hands the message to the handler of package forward, which
// publishes it through a Watermill message.Publisher and so knows no
// broker: JetStream, Kafka and a signed webhook are each a publisher of
// their own package. This package imports no Watermill, so the domain
// that adds events depends on none.
package publish
