// Package natstest runs a NATS server with JetStream for a test: the
// nats-server binary on a free loopback port with a store of the test's
// own, which the test can stop and start again.
package natstest
