package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/smtp"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// env is what every command starts from: the configuration and a logger.
type env struct {
	cfg config.Config
	log *slog.Logger
}

func load(getenv func(string) string, stderr io.Writer) (env, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return env{}, err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	return env{cfg: cfg, log: log}, nil
}

// postgresURL returns DATABASE_URL when it selects PostgreSQL.
func (e env) postgresURL() (string, error) {
	url := e.cfg.DatabaseURL
	switch {
	case url == "" || strings.HasPrefix(url, "sqlite:"):
		return "", fmt.Errorf("DATABASE_URL=%q: the SQLite backend is not built yet; set DATABASE_URL to a postgres:// URL", url)
	case !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://"):
		return "", fmt.Errorf("DATABASE_URL must start with postgres:// or sqlite:, got %q", url)
	}
	return url, nil
}

// openDB connects to the configured database and migrates it.
func (e env) openDB(ctx context.Context) (*postgres.DB, error) {
	url, err := e.postgresURL()
	if err != nil {
		return nil, err
	}
	db, err := postgres.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	applied, err := db.Migrate(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	if len(applied) > 0 {
		e.log.Info("migrated database", "versions", applied)
	}
	return db, nil
}

// handlers returns the outbox handlers of the running configuration, by
// topic. A topic missing here is buried by the relay, so no command adds a
// message for it.
func (e env) handlers(meter metric.MeterProvider) (map[string]outbox.Handler, error) {
	var sender mail.Sender = mail.LogSender{Log: e.log}
	if e.cfg.SMTPURL != "" {
		s, err := smtp.New(e.cfg.SMTPURL, e.cfg.SMTPTimeout)
		if err != nil {
			return nil, err
		}
		sender = s
	}
	return mail.Handlers(sender, mail.Config{
		From:   e.cfg.MailFrom,
		Domain: e.cfg.MailDomain,
		Log:    e.log,
		Meter:  meter.Meter("github.com/eventsourced/accounts/internal/user/mail"),
	})
}

// relay returns the outbox relay of the running configuration.
func (e env) relay(db *postgres.DB, meter metric.MeterProvider) (*outbox.Relay, error) {
	handlers, err := e.handlers(meter)
	if err != nil {
		return nil, err
	}
	return outbox.NewRelay(db.Outbox(), handlers, e.cfg.Outbox,
		outbox.WithLogger(e.log), outbox.WithMeterProvider(meter))
}

// newMetrics returns a meter provider whose metrics the handler serves in
// the Prometheus text format.
func newMetrics() (*sdkmetric.MeterProvider, http.Handler, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)),
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}
