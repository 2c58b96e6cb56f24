// Package postgres is the PostgreSQL backend: the unit of work, the event
// store and the outbox store on pgx/v5. All PostgreSQL SQL of the project
// lives here; the rest of the project knows no SQL dialect.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/eventsourced/accounts/internal/wakeup"
	"github.com/eventsourced/accounts/migrations"
)

// DB is a connection to one PostgreSQL database and the stores over it.
//
// It holds two pools. Units of work use the main pool with the server's
// settings. The relay's own bookkeeping (claims, acknowledgements, retries,
// burials) uses a second pool with synchronous_commit off: a crash of the
// server can then lose the last few of those writes, which only makes the
// relay deliver a message again, as at-least-once delivery allows, and in
// return the relay does not wait for a disk flush per batch.
//
// A unit of work that added outbox messages wakes, once it has committed,
// the relays of this DB at once, in process, and asks the DB's notifier to
// tell relays elsewhere with a NOTIFY of its own (see [Outbox.Wakeups]).
type DB struct {
	pool   *pgxpool.Pool
	relay  *pgxpool.Pool
	schema string
	log    *slog.Logger
	// channel is the LISTEN/NOTIFY channel of the outbox.
	channel string
	// wake wakes the relays of this DB in this process.
	wake *wakeup.Fanout
	// notifier sends NOTIFY on channel for the relays of other processes.
	notifier *notifier
	// logs is the main pool as database/sql, for the subscribers of the
	// event log ([DB.Log]), and logWake wakes them when a unit of work of
	// this process appended events.
	logs    *sql.DB
	logWake *wakeup.Fanout
}

// Option changes how [Open] and [OpenConfig] open a database.
type Option func(*options)

type options struct {
	log *slog.Logger
}

// WithLogger makes the DB log to l what it cannot do and works around, such
// as a lost LISTEN connection; by default it logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// Open connects to the database at url, a postgres:// URL or key=value
// string as pgx accepts, and checks that it answers. An error that says
// the database cannot be reached wraps [uow.ErrUnavailable]. The main pool
// holds up to [DefaultMaxConns] connections unless url sets pool_max_conns.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	cfg, err := ParseConfig(url)
	if err != nil {
		return nil, err
	}
	return OpenConfig(ctx, cfg, opts...)
}

// DefaultMaxConns is the size of the main pool when the URL does not set
// pool_max_conns. A unit of work holds its connection while the app works
// between its round trips, so the server sits idle on each connection part
// of the time, and it takes a few connections per server core to keep the
// server busy: pgx's default, the number of the app's cores and at least
// 4, capped sign-ins on two cores at about 2,500/s, 16 let them reach
// 3,300/s (see README.md).
const DefaultMaxConns = 16

// ParseConfig parses url as [Open] does, with [DefaultMaxConns] unless url
// sets pool_max_conns.
func ParseConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	return cfg, nil
}

// OpenConfig is [Open] with a parsed pool configuration.
func OpenConfig(ctx context.Context, cfg *pgxpool.Config, opts ...Option) (*DB, error) {
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", unavailable(ctx, err))
	}
	relayCfg := cfg.Copy()
	relayCfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	relayCfg.ConnConfig.RuntimeParams["application_name"] = "outbox-relay"
	// A claim must walk the due index until it has enough messages. While
	// the outbox's statistics are older than a burst of messages, the
	// planner would rather read every due message by a bitmap, probe the
	// key of each and sort them: 300 ms for a claim of 500 among 24,000.
	// The relay's queries want no sort and no bitmap.
	relayCfg.ConnConfig.RuntimeParams["enable_sort"] = "off"
	relayCfg.ConnConfig.RuntimeParams["enable_bitmapscan"] = "off"
	relayCfg.MaxConns = min(cfg.MaxConns, 4)
	relay, err := pgxpool.NewWithConfig(ctx, relayCfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect relay pool: %w", unavailable(ctx, err))
	}
	db := &DB{pool: pool, relay: relay, log: o.log, wake: wakeup.New(), logs: stdlib.OpenDBFromPool(pool), logWake: wakeup.New()}
	if err := pool.QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&db.schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: ping: %w", unavailable(ctx, err))
	}
	db.channel = notifyChannel(db.schema)
	db.notifier = newNotifier(relayCfg.ConnConfig, db.channel, db.log)
	return db, nil
}

// Close stops the notifier and closes both pools, waiting for connections
// in use to be returned.
func (db *DB) Close() {
	if db.notifier != nil {
		db.notifier.close()
	}
	_ = db.logs.Close()
	db.relay.Close()
	db.pool.Close()
}

// Ping reports whether the database answers; an error that says it cannot
// be reached wraps [uow.ErrUnavailable].
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", unavailable(ctx, err))
	}
	return nil
}

// Pool returns the main pool, for code of this backend outside this package
// such as tests and benchmarks.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Runner returns a unit-of-work runner whose transactions take their time
// from now; nil means time.Now.
func (db *DB) Runner(now func() time.Time) *Runner {
	if now == nil {
		now = time.Now
	}
	return &Runner{db: db, now: now}
}

// Events returns the event store.
func (db *DB) Events() *EventStore { return &EventStore{} }

// Outbox returns the outbox store. Its bookkeeping runs on the relay pool;
// [Outbox.Add] runs in the unit of work's transaction. Every Outbox of one
// DB shares its wake-ups.
func (db *DB) Outbox() *Outbox {
	return &Outbox{pool: db.relay, channel: db.channel, db: db}
}

// Migrate applies every migration that the database lacks and returns the
// versions it applied.
func (db *DB) Migrate(ctx context.Context) ([]int64, error) {
	sqlDB := stdlib.OpenDBFromPool(db.pool)
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.Postgres(),
		goose.WithSessionLocker(migrationLock{id: lockID("migrations." + db.schema)}))
	if err != nil {
		return nil, fmt.Errorf("postgres: migrations: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			return nil, fmt.Errorf("postgres: migrate: %w", partial.Err)
		}
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	applied := make([]int64, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// migrationLock lets many instances start at once: one migrates while the
// others wait on a session advisory lock, then find nothing to do. It waits
// on the lock instead of polling for it, as goose's own Postgres locker does
// every five seconds, and its ID is the schema's, so that deployments (and
// tests) in other schemas of the database never wait for each other.
type migrationLock struct{ id int64 }

var _ lock.SessionLocker = migrationLock{}

func (l migrationLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", l.id); err != nil {
		return fmt.Errorf("postgres: lock migrations: %w", err)
	}
	return nil
}

func (l migrationLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", l.id); err != nil {
		return fmt.Errorf("postgres: unlock migrations: %w", err)
	}
	return nil
}

// lockID returns the advisory lock ID of name.
func lockID(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}
