package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/user"
)

// defaultSQLitePath is where the app keeps its data when DATABASE_URL is
// unset.
const defaultSQLitePath = "data/accounts.db"

// database is where DATABASE_URL points: a PostgreSQL URL, or a SQLite file.
type database struct {
	postgresURL string
	sqlitePath  string
	// pooler and listenURL are DATABASE_POOLER and DATABASE_LISTEN_URL,
	// for PostgreSQL.
	pooler    postgres.Pooler
	listenURL string
	// tracerProvider traces the units of work and statements (nil: the global
	// provider).
	tracerProvider trace.TracerProvider
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
	d.tracerProvider = e.tracer
	return d, nil
}

// openToServe is [env.openDB] for serve, whose start says at info where
// its data is; the other commands say it at debug.
func (e env) openToServe(ctx context.Context) (backend.Backend, error) {
	return e.openLogged(ctx, false, slog.LevelInfo)
}

// openLogged connects to the configured database and migrates it, and
// logs at level where it is. With existing, a SQLite file that does not
// exist is an error, not a new database.
func (e env) openLogged(ctx context.Context, existing bool, level slog.Level) (backend.Backend, error) {
	d, err := e.database()
	if err != nil {
		return nil, err
	}
	if existing && d.sqlitePath != "" {
		if _, err := os.Stat(d.sqlitePath); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("DATABASE_URL: there is no database at %s (app migrate or app serve makes one)", d.sqlitePath)
		}
	}
	b, applied, err := d.open(ctx, e.log)
	if err != nil {
		return nil, err
	}
	if len(applied) > 0 {
		e.log.Info("migrated database", "versions", applied)
	}
	e.log.Log(ctx, level, "database open", d.logAttrs()...)
	return b, nil
}

// postgresOptions are the options of the PostgreSQL backend.
func (d database) postgresOptions(log *slog.Logger) []postgres.Option {
	return []postgres.Option{postgres.WithLogger(log), postgres.WithPooler(d.pooler), postgres.WithListenURL(d.listenURL), postgres.WithTracerProvider(d.tracerProvider)}
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
func (d database) open(ctx context.Context, log *slog.Logger) (backend.Backend, []int64, error) {
	b, err := d.connect(ctx, log)
	if err != nil {
		return nil, nil, d.wrap(err)
	}
	applied, err := b.Migrate(ctx)
	if err != nil {
		_ = b.Close()
		return nil, nil, d.wrap(err)
	}
	return b, applied, nil
}

// connect opens the backend that d names, without migrating it: the one
// place that chooses between PostgreSQL and SQLite.
func (d database) connect(ctx context.Context, log *slog.Logger) (backend.Backend, error) {
	if d.postgresURL != "" {
		db, err := postgres.Open(ctx, d.postgresURL, d.postgresOptions(log)...)
		if err != nil {
			return nil, err
		}
		return db, nil
	}
	if dir := filepath.Dir(d.sqlitePath); dir != "." {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	db, err := sqlite.Open(ctx, d.sqlitePath, sqlite.WithTracerProvider(d.tracerProvider))
	if err != nil {
		return nil, err
	}
	return db, nil
}

// wrap names DATABASE_URL, without its password, in an error of a
// PostgreSQL database ([databaseError]); an error of SQLite, whose opening
// names the file, stays as it is.
func (d database) wrap(err error) error {
	if d.postgresURL == "" {
		return err
	}
	return &databaseError{redactURL(d.postgresURL), err}
}

// openScratch opens an empty database of the same kind that leaves no
// trace: a schema of its own on PostgreSQL, a file in a temporary folder on
// SQLite. drop removes it.
func (d database) openScratch(ctx context.Context, log *slog.Logger) (backend.Backend, func(context.Context) error, error) {
	if d.postgresURL != "" {
		db, drop, err := postgres.OpenScratch(ctx, d.postgresURL, "bench_", d.postgresOptions(log)...)
		if err != nil {
			return nil, nil, err
		}
		return db, drop, nil
	}
	dir, err := os.MkdirTemp("", "accounts-bench-")
	if err != nil {
		return nil, nil, err
	}
	b, _, err := database{sqlitePath: filepath.Join(dir, "bench.db"), tracerProvider: d.tracerProvider}.open(ctx, log)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return b, func(context.Context) error {
		return errors.Join(b.Close(), os.RemoveAll(dir))
	}, nil
}

// activity is the account activity projection over db, at its first
// version, which opens addresses with keys, with the organizations'
// joins, leaves and changes of role among it.
func activity(db backend.Backend, keys *keyring.Keyring) user.ActivityProjection {
	return user.ActivityProjection{
		Store: db.ActivityStore(), Log: db.Log(async.LogConfig{}), Keys: keys,
		Sources: []user.ActivitySource{org.ActivitySource{Events: db.Events()}},
	}
}
