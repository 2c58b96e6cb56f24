package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/logctx"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/smtp"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// env is what every command starts from: the configuration and a logger,
// and the tracer provider once [env.startTracing] has built it (nil: the
// global one).
type env struct {
	cfg    config.Config
	log    *slog.Logger
	tracer trace.TracerProvider
	// mailOut is the terminal that the relay of `app serve` prints mail
	// on when SMTP_URL is unset ([env.printMailOn]); nil: none.
	mailOut io.Writer
}

func load(getenv func(string) string, stderr io.Writer) (env, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return env{}, err
	}
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewTextHandler(stderr, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(stderr, opts)
	}
	// Each line of a request names it, and its trace when there is one.
	log := slog.New(logctx.New(h))
	return env{cfg: cfg, log: log}, nil
}

// openDB connects to the configured database and migrates it.
func (e env) openDB(ctx context.Context) (backend.Backend, error) {
	return e.open(ctx, false)
}

// openExistingDB is openDB for the commands that only read: a SQLite file
// that does not exist is an error, not a new database.
func (e env) openExistingDB(ctx context.Context) (backend.Backend, error) {
	return e.open(ctx, true)
}

func (e env) open(ctx context.Context, existing bool) (backend.Backend, error) {
	return e.openLogged(ctx, existing, slog.LevelDebug)
}

// handlers returns the mail handlers of the running configuration, by
// topic, when it can send mail: through SMTP_URL, or printed on the
// terminal of `app serve` ([env.printMailOn]). Without either it returns
// none, and the relay leaves the mail in the outbox for one that can send
// it: never to the log (see docs/personal-data.md), never lost. The mail
// handlers spend the mail budgets kept on db.
func (e env) handlers(db backend.Backend, keys *keyring.Keyring, meter metric.MeterProvider) (map[string]outbox.Handler, error) {
	var sender mail.Sender
	switch {
	case e.cfg.SMTPURL != "":
		s, err := smtp.New(e.cfg.SMTPURL, e.cfg.SMTPTimeout, smtp.WithTracerProvider(e.tracer))
		if err != nil {
			return nil, err
		}
		sender = s
	case e.mailOut != nil:
		sender = &mail.Console{Out: e.mailOut}
	default:
		return map[string]outbox.Handler{}, nil
	}
	budget, err := e.mailBudget(db, keys)
	if err != nil {
		return nil, err
	}
	return mail.Handlers(sender, mail.Config{
		From:   e.cfg.MailFrom,
		Domain: e.cfg.MailDomain,
		Log:    e.log,
		Meter:  meter.Meter("github.com/eventsourced/accounts/internal/user/mail"),
		Budget: budget,
	})
}

// mailBudget returns the mail budget of each mailbox, MAIL_BUDGET per
// MAIL_BUDGET_WINDOW, on db.
func (e env) mailBudget(db backend.Backend, keys *keyring.Keyring) (*mail.Budget, error) {
	p := user.Policy(e.cfg.Policy).WithDefaults()
	return mail.NewBudget(mail.BudgetConfig{Limit: p.MailBudget, Window: p.MailBudgetWindow}, db.Runner(nil), db.MailBudgets(), keys)
}

// configuredRelay is the outbox relay of the running configuration with
// the publishers its handlers use.
type configuredRelay struct {
	*relay.Relay
	pubs *publishers
}

// Close stops the relay's metrics and closes its publishers. Call it once
// the relay has stopped.
func (r configuredRelay) Close() error {
	return errors.Join(r.Relay.Close(), r.pubs.Close())
}

// relay returns the outbox relay of the running configuration: it claims
// the mail topics when it can send mail ([env.handlers]), and the
// integration topics of the destinations that BROKER_URL and WEBHOOK_URL
// configure; the messages of other topics it leaves alone. Integration
// topics are retried for PUBLISH_RETRY_FOR rather than
// OUTBOX_MAX_ATTEMPTS times.
func (e env) relay(db backend.Backend, keys *keyring.Keyring, meter metric.MeterProvider) (configuredRelay, error) {
	handlers, err := e.handlers(db, keys, meter)
	if err != nil {
		return configuredRelay{}, err
	}
	pubs, err := e.publishers()
	if err != nil {
		return configuredRelay{}, err
	}
	maps.Copy(handlers, pubs.handlers)
	r, err := relay.New(db.Outbox(), handlers, e.cfg.Outbox,
		relay.WithLogger(e.log), relay.WithMeterProvider(meter), relay.WithTracerProvider(e.tracer),
		relay.WithStopGrace(deliveryGrace(e.cfg.ShutdownGrace)),
		e.publishPolicy(pubs))
	if err != nil {
		_ = pubs.Close()
		return configuredRelay{}, err
	}
	return configuredRelay{Relay: r, pubs: pubs}, nil
}

// deliveryGrace is how long the deliveries in flight may go on once a stop
// begins: its grace less a quarter, at most 5 s, left to release those cut
// short and write the last acknowledgements.
func deliveryGrace(grace time.Duration) time.Duration {
	return grace - min(grace/4, 5*time.Second)
}

// newMetrics returns a meter provider whose metrics the handler serves in
// the Prometheus text format, or in OpenMetrics to a scraper that asks for
// it: only OpenMetrics carries exemplars. When traced, a measurement made
// inside a sampled span keeps that span's trace and span IDs as an
// exemplar (the SDK's trace_based filter, which OTEL_METRICS_EXEMPLAR_FILTER
// may change). Otherwise none is kept: the no-op tracer of tracing off
// passes an incoming traceparent on, which would name a trace that this
// service never recorded.
func newMetrics(traced bool) (*sdkmetric.MeterProvider, http.Handler, error) {
	reg := prometheus.NewRegistry()
	// The Go runtime's and the process's own metrics, beside the service's.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "accounts"), attribute.String("service.version", version()))
	opts := []sdkmetric.Option{sdkmetric.WithReader(exporter), sdkmetric.WithResource(res)}
	if !traced {
		opts = append(opts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	}
	return sdkmetric.NewMeterProvider(opts...),
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}), nil
}

// services are the domains' services over one database.
type services struct {
	users *user.Service
	orgs  *org.Service
}

// services returns the user domain's and the organizations domain's
// services on db, which seal addresses with keys and record their
// commands' metrics with meter (none when nil). The organizations service
// authenticates its sessions through the user service, and the user
// service's erasure of an account takes the account out of its
// organizations ([org.Service.Erased]).
func (e env) services(db backend.Backend, keys *keyring.Keyring, meter metric.MeterProvider) (services, error) {
	if meter == nil {
		meter = noop.NewMeterProvider()
	}
	var orgs *org.Service
	users, err := user.NewService(user.Deps{
		Runner: db.Runner(nil),
		Events: db.Events(),
		Outbox: db.Outbox(),
		Views:  db.Views(),
		Keys:   keys,
	}, user.Policy(e.cfg.Policy), e.cfg.BaseURL, user.WithIntegrationEvents(e.integrationEvents()), user.WithTracerProvider(e.tracer), user.WithMeterProvider(meter),
		user.WithErasure(func(ctx context.Context, tx uow.Tx, u user.User) error { return orgs.Erased(ctx, tx, u) }))
	if err != nil {
		return services{}, err
	}
	orgs, err = org.NewService(org.Deps{
		Runner:    db.Runner(nil),
		Events:    db.Events(),
		Outbox:    db.Outbox(),
		Views:     db.OrgViews(),
		Users:     users,
		UserViews: db.Views(),
		Keys:      keys,
	}, org.Policy(e.cfg.OrgPolicy), e.cfg.BaseURL, org.WithIntegrationEvents(e.integrationEvents()), org.WithTracerProvider(e.tracer), org.WithMeterProvider(meter))
	if err != nil {
		return services{}, err
	}
	return services{users: users, orgs: orgs}, nil
}
