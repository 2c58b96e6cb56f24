package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
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
func (e env) handlers() map[string]outbox.Handler {
	return map[string]outbox.Handler{}
}
