package main

import (
	"context"
	"fmt"
	"github.com/jackc/pgx/v5"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// defaultSQLitePath is where the app keeps its data when DATABASE_URL is
// unset.
const defaultSQLitePath = "data/accounts.db"

// backend is what the commands need of a database, the same on PostgreSQL
// and SQLite.
type backend interface {
	Runner(now func() time.Time) uow.Runner
	Events() eventstore.Store
	Outbox() outboxStore
	Views() user.Views
	// Log is the event log that asynchronous projections follow, its
	// subscribers configured by cfg (zero fields: the backend's defaults).
	Log(cfg projections.LogConfig) projections.Log
	// Activity is the activity projection and its reads.
	Activity(keys *keyring.Keyring) activity
	// DataKeys is the keyring's store of wrapped data keys.
	DataKeys() keyring.Store
	Ping(ctx context.Context) error
	Close()
}

// activity is an account activity projection with its reads, rebuilt
// blue/green.
type activity interface {
	projections.Rebuildable
	httpapi.ActivityReader
	// Behind counts the events of the projection's types that its
	// committed offset has not reached.
	Behind(ctx context.Context) (int64, error)
}

// outboxStore is an outbox store with what operators use, inspection and
// requeuing of buried messages, and what an erasure does, the purge of a
// person's messages. Both backends have these; only the
// operators' commands need them, so they are asked for here.
type outboxStore interface {
	outbox.RelayStore
	outbox.Purger
	// Buried returns up to limit buried messages, oldest burial first.
	Buried(ctx context.Context, limit int) ([]outbox.Record, error)
	// Lookup returns the message with id as the store holds it, or an error
	// wrapping [outbox.ErrNotFound].
	Lookup(ctx context.Context, id uuid.UUID) (outbox.Record, error)
	// List returns the messages that f admits, earliest due first.
	List(ctx context.Context, f outbox.ListFilter) ([]outbox.Record, error)
	// Discard deletes a buried message; one still to deliver is an error
	// wrapping [outbox.ErrNotBuried].
	Discard(ctx context.Context, id uuid.UUID) error
	// DiscardBuried deletes the buried messages of topic (every topic
	// when empty) buried before before.
	DiscardBuried(ctx context.Context, topic string, before time.Time) (int64, error)
	// RedactBuried removes fields from the payloads of the buried messages
	// of topic created before before.
	RedactBuried(ctx context.Context, topic string, fields []string, before time.Time) (int64, error)
	// Requeue makes a buried message due at at, with its attempts counted
	// from zero again and its last error kept. It returns an error wrapping
	// [outbox.ErrNotFound] for a message that is not buried.
	Requeue(ctx context.Context, id uuid.UUID, at time.Time) error
}

type postgresBackend struct{ db *postgres.DB }

func (b postgresBackend) Runner(now func() time.Time) uow.Runner        { return b.db.Runner(now) }
func (b postgresBackend) Events() eventstore.Store                      { return b.db.Events() }
func (b postgresBackend) Outbox() outboxStore                           { return b.db.Outbox() }
func (b postgresBackend) Views() user.Views                             { return postgres.UserViews{} }
func (b postgresBackend) Log(cfg projections.LogConfig) projections.Log { return b.db.Log(cfg) }
func (b postgresBackend) Activity(k *keyring.Keyring) activity          { return b.db.Activity(k) }
func (b postgresBackend) DataKeys() keyring.Store                       { return postgres.DataKeys{} }
func (b postgresBackend) Ping(ctx context.Context) error                { return b.db.Ping(ctx) }
func (b postgresBackend) Close()                                        { b.db.Close() }

type sqliteBackend struct{ db *sqlite.DB }

func (b sqliteBackend) Runner(now func() time.Time) uow.Runner        { return b.db.Runner(now) }
func (b sqliteBackend) Events() eventstore.Store                      { return b.db.Events() }
func (b sqliteBackend) Outbox() outboxStore                           { return b.db.Outbox() }
func (b sqliteBackend) Views() user.Views                             { return sqlite.UserViews{} }
func (b sqliteBackend) Log(cfg projections.LogConfig) projections.Log { return b.db.Log(cfg) }
func (b sqliteBackend) Activity(k *keyring.Keyring) activity          { return b.db.Activity(k) }
func (b sqliteBackend) DataKeys() keyring.Store                       { return sqlite.DataKeys{} }
func (b sqliteBackend) Ping(ctx context.Context) error                { return b.db.Ping(ctx) }
func (b sqliteBackend) Close()                                        { _ = b.db.Close() }

// database is where DATABASE_URL points: a PostgreSQL URL, or a SQLite file.
type database struct {
	postgresURL string
	sqlitePath  string
	// pooler and listenURL are DATABASE_POOLER and DATABASE_LISTEN_URL,
	// for PostgreSQL.
	pooler    postgres.Pooler
	listenURL string
}

// database returns where the configuration points: DATABASE_URL, and on
// PostgreSQL DATABASE_POOLER and DATABASE_LISTEN_URL.
func (e env) database() (database, error) {
	d, err := parseDatabaseURL(e.cfg.DatabaseURL)
	if err != nil {
		return database{}, err
	}
	if d.postgresURL != "" {
		if d.pooler, err = postgres.ParsePooler(e.cfg.DatabasePooler); err != nil {
			return database{}, err
		}
		d.listenURL = e.cfg.DatabaseListenURL
	}
	return d, nil
}

// postgresOptions are the options of the PostgreSQL backend.
func (d database) postgresOptions(log *slog.Logger) []postgres.Option {
	return []postgres.Option{postgres.WithLogger(log), postgres.WithPooler(d.pooler), postgres.WithListenURL(d.listenURL)}
}

// parseDatabaseURL reads DATABASE_URL: postgres:// or postgresql:// selects
// PostgreSQL, sqlite:PATH selects SQLite, and empty selects SQLite at
// defaultSQLitePath.
func parseDatabaseURL(url string) (database, error) {
	switch {
	case url == "":
		return database{sqlitePath: defaultSQLitePath}, nil
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return database{postgresURL: url}, nil
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite:"), "//")
		if path == "" {
			return database{}, fmt.Errorf("DATABASE_URL %q names no file; write sqlite:PATH", url)
		}
		return database{sqlitePath: path}, nil
	default:
		return database{}, fmt.Errorf("DATABASE_URL must start with postgres://, postgresql:// or sqlite:, got %s", redactURL(url))
	}
}

// logAttrs describes where the data is, for the log: the file, or the
// server's host, port and database, never a password.
func (d database) logAttrs() []any {
	if d.postgresURL == "" {
		path, err := filepath.Abs(d.sqlitePath)
		if err != nil {
			path = d.sqlitePath
		}
		return []any{"backend", "sqlite", "path", path}
	}
	cfg, err := pgx.ParseConfig(d.postgresURL)
	if err != nil {
		return []any{"backend", "postgres"}
	}
	return []any{"backend", "postgres", "host", cfg.Host, "port", cfg.Port, "database", cfg.Database, "user", cfg.User, "pooler", string(d.pooler)}
}

// redactURL returns raw quoted with its password masked, or its scheme
// alone when it does not parse ([config.RedactURL]).
func redactURL(raw string) string {
	shown, parsed := config.RedactURL(raw)
	if parsed {
		return strconv.Quote(shown)
	}
	return shown
}

// databaseError is an error of the database that DATABASE_URL names. It
// names the variable and the database, without a password, and says each
// line of the driver's error once: pgx lists every attempt to connect,
// and with sslmode=prefer it makes two alike.
type databaseError struct {
	where string
	err   error
}

func (e *databaseError) Error() string {
	var lines []string
	for _, l := range strings.Split(e.err.Error(), "\n") {
		if len(lines) == 0 || l != lines[len(lines)-1] {
			lines = append(lines, l)
		}
	}
	return "DATABASE_URL " + e.where + ": " + strings.Join(lines, "\n")
}

func (e *databaseError) Unwrap() error { return e.err }

// open connects to the database, creating a SQLite file and its folder if
// need be, and migrates it. The backend logs to log what it works around,
// such as a lost LISTEN connection on PostgreSQL.
func (d database) open(ctx context.Context, log *slog.Logger) (backend, []int64, error) {
	if d.postgresURL != "" {
		where := redactURL(d.postgresURL)
		db, err := postgres.Open(ctx, d.postgresURL, d.postgresOptions(log)...)
		if err != nil {
			return nil, nil, &databaseError{where, err}
		}
		applied, err := db.Migrate(ctx)
		if err != nil {
			db.Close()
			return nil, nil, &databaseError{where, err}
		}
		return postgresBackend{db}, applied, nil
	}
	if dir := filepath.Dir(d.sqlitePath); dir != "." {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	db, err := sqlite.Open(ctx, d.sqlitePath)
	if err != nil {
		return nil, nil, err
	}
	applied, err := db.Migrate(ctx)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return sqliteBackend{db}, applied, nil
}

// openScratch opens an empty database of the same kind that leaves no
// trace: a schema of its own on PostgreSQL, a file in a temporary folder on
// SQLite. drop removes it.
func (d database) openScratch(ctx context.Context, log *slog.Logger) (backend, func(context.Context) error, error) {
	if d.postgresURL != "" {
		db, drop, err := postgres.OpenScratch(ctx, d.postgresURL, "bench_", d.postgresOptions(log)...)
		if err != nil {
			return nil, nil, err
		}
		return postgresBackend{db}, drop, nil
	}
	dir, err := os.MkdirTemp("", "accounts-bench-")
	if err != nil {
		return nil, nil, err
	}
	b, _, err := database{sqlitePath: filepath.Join(dir, "bench.db")}.open(ctx, log)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return b, func(context.Context) error {
		b.Close()
		return os.RemoveAll(dir)
	}, nil
}
