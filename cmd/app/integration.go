package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"

	orgintegration "github.com/eventsourced/accounts/internal/org/integration"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/publish/forward"
	"github.com/eventsourced/accounts/internal/publish/kafkabroker"
	"github.com/eventsourced/accounts/internal/publish/natsbroker"
	"github.com/eventsourced/accounts/internal/publish/webhook"
	"github.com/eventsourced/accounts/internal/user/integration"
)

// integrationEvents returns what the commands add for the configured
// destinations of integration events. It connects to nothing: an
// instance that serves only the API adds the events that the relays
// publish.
func (e env) integrationEvents() publish.Events {
	ev := publish.Events{Source: e.cfg.BaseURL}
	if e.cfg.Broker().Kind != "" {
		ev.Destinations = append(ev.Destinations, publish.Broker)
	}
	if e.cfg.WebhookURL != "" {
		ev.Destinations = append(ev.Destinations, publish.Webhook)
	}
	return ev
}

// publishers are the relay's handlers of integration topics and what they
// publish through.
type publishers struct {
	handlers map[string]outbox.Handler
	// topics are the outbox topics of the handlers.
	topics []string
	pubs   []message.Publisher
}

// Close closes every publisher.
func (p *publishers) Close() error {
	var errs []error
	for _, pub := range p.pubs {
		errs = append(errs, pub.Close())
	}
	return errors.Join(errs...)
}

// integrationTypes returns the type of every integration event that a
// relay delivers: the user's and the organizations', which the services
// add (user.WithIntegrationEvents, org.WithIntegrationEvents), and the
// user's legacy types.
func integrationTypes() []string {
	return slices.Concat(integration.Types(), orgintegration.Types(), slices.Sorted(maps.Keys(integration.Legacy())))
}

// add gives each integration event type bound for d a handler that
// publishes through pub to the topic that topic names for the type's
// route ([integration.Route], the same for every domain's types). The
// legacy types have handlers too: their events added before the upgrade
// are still in the outbox, and a relay with no handler for them would
// leave them there for good.
func (p *publishers) add(d publish.Destination, pub message.Publisher, topic func(string) string) {
	p.pubs = append(p.pubs, pub)
	h := forward.Handler(pub, func(typ string) string { return topic(integration.Route(typ)) })
	for _, typ := range integrationTypes() {
		t := publish.Topic(d, typ)
		p.handlers[t] = h
		p.topics = append(p.topics, t)
	}
}

// publishers connects to the configured destinations of integration
// events; none need be reachable yet.
func (e env) publishers() (*publishers, error) {
	p := &publishers{handlers: map[string]outbox.Handler{}}
	prefix := e.cfg.BrokerSubjectPrefix
	switch b := e.cfg.Broker(); b.Kind {
	case "nats":
		pub, err := natsbroker.New(natsbroker.Config{
			URLs:           strings.Join(b.Addrs, ","),
			Stream:         streamName(prefix),
			Subjects:       []string{prefix + ">"},
			Log:            e.log,
			TracerProvider: e.tracer,
		})
		if err != nil {
			return nil, fmt.Errorf("BROKER_URL: %w", err)
		}
		p.add(publish.Broker, pub, forward.Subject(prefix))
	case "kafka":
		pub, err := kafkabroker.New(kafkabroker.Config{Brokers: b.Addrs, TracerProvider: e.tracer})
		if err != nil {
			return nil, fmt.Errorf("BROKER_URL: %w", err)
		}
		p.add(publish.Broker, pub, forward.Category(prefix))
	}
	if e.cfg.WebhookURL != "" {
		pub, err := webhook.New(webhook.Config{URL: e.cfg.WebhookURL, Secret: e.cfg.WebhookSecret, TracerProvider: e.tracer})
		if err != nil {
			_ = p.Close()
			return nil, err
		}
		// One URL takes every type: the topic is not used.
		p.add(publish.Webhook, pub, func(typ string) string { return typ })
	}
	return p, nil
}

// publishPolicy is the retry policy of the integration topics: tried for
// PUBLISH_RETRY_FOR, and at least OUTBOX_MAX_ATTEMPTS times, however long
// an event waited behind the user's earlier ones.
func (e env) publishPolicy(p *publishers) relay.Option {
	return relay.WithRetryPolicy(relay.RetryPolicy{MaxAge: e.cfg.PublishRetryFor, MinAttempts: e.cfg.Outbox.MaxAttempts}, p.topics...)
}

// streamName returns the JetStream stream of the subjects under prefix:
// the prefix in capitals with its dots as underscores, "ACCOUNTS" for
// "accounts.".
func streamName(prefix string) string {
	return strings.ToUpper(strings.ReplaceAll(strings.TrimSuffix(prefix, "."), ".", "_"))
}
