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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
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
//
// Behind a connection pooler ([WithPooler]) the DB sends only the startup
// parameters the pooler passes on and sets the others itself, as [Pooler]
// describes: no setting of the DB reaches another client of the pooler.
type DB struct {
	pool   *pgxpool.Pool
	relay  *pgxpool.Pool
	schema string
	log    *slog.Logger
	pooler Pooler
	// local and relayLocal are the settings each transaction of the main
	// pool and of the relay pool sets, behind a transaction pooler; nil
	// otherwise.
	local, relayLocal *settings
	// listen is the configuration of the LISTEN connection, nil when the
	// DB cannot listen (behind a transaction pooler without
	// [WithListenURL]).
	listen *pgx.ConnConfig
	// channel is the LISTEN/NOTIFY channel of the outbox.
	channel string
	// wake wakes the relays of this DB in this process, and handover
	// passes them the messages of its units of work.
	wake     *wakeup.Fanout
	handover outbox.Handover
	// notifier sends NOTIFY on channel for the relays of other processes.
	notifier *notifier
	// logs is the main pool as database/sql, for the subscribers of the
	// event log ([DB.Log]), and logWake wakes them when a unit of work of
	// this process appended events.
	logs    *sql.DB
	logWake *wakeup.Fanout
}

var _ backend.Backend = (*DB)(nil)

// Option changes how [Open] and [OpenConfig] open a database.
type Option func(*options)

type options struct {
	log       *slog.Logger
	pooler    Pooler
	listenURL string
	tp        trace.TracerProvider
}

// WithPooler tells the DB what stands between it and PostgreSQL; by default
// [PoolerNone].
func WithPooler(p Pooler) Option {
	return func(o *options) { o.pooler = p }
}

// WithListenURL makes the DB listen for the commits of other processes
// (see [Outbox.Wakeups]) on connections to url, which must reach the same
// database directly: a transaction pooler cannot hold a LISTEN. Without
// it the DB listens on its own connections, except behind a transaction
// pooler, where its relays hear of other processes' commits only by
// polling ([DB.Listening]).
func WithListenURL(url string) Option {
	return func(o *options) { o.listenURL = url }
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
// server busy; too many, and the server's processes crowd its cores. On
// two cores 8 gave 2–24% more sign-ins than 16 in eight pairs of runs,
// with no worse a commit latency, and 4 about as many as 8; 4 once left
// the server idle, when the app's part of a request was heavier
// (docs/benchmarks.md). Set pool_max_conns to a few times the database's
// cores.
const DefaultMaxConns = 8

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
	o := options{log: slog.New(slog.DiscardHandler), pooler: PoolerNone}
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := ParsePooler(string(o.pooler)); err != nil {
		return nil, err
	}
	var listen *pgx.ConnConfig
	if o.listenURL != "" {
		lc, err := pgx.ParseConfig(o.listenURL)
		if err != nil {
			return nil, fmt.Errorf("postgres: parse listen url: %w", err)
		}
		listen = lc
	}
	cfg = cfg.Copy()
	relayCfg := cfg.Copy()
	relayCfg.ConnConfig.RuntimeParams["application_name"] = "outbox-relay"
	// The main pool's statements are traced, the relay's are not
	// ([statementTracer]).
	traceStatements(cfg.ConnConfig, o.tp)
	relayCfg.MaxConns = min(cfg.MaxConns, 4)
	local := prepare(cfg, o.pooler, nil)
	// The relay's bookkeeping is written with synchronous_commit off (see
	// [DB]). A claim must walk the due index until it has enough
	// messages. While the outbox's statistics are older than a burst of
	// messages, the planner would rather read every due message by a
	// bitmap, probe the key of each and sort them: 300 ms for a claim of
	// 500 among 24,000. The relay's queries want no sort and no bitmap.
	relayLocal := prepare(relayCfg, o.pooler, map[string]string{
		"synchronous_commit": "off",
		"enable_sort":        "off",
		"enable_bitmapscan":  "off",
	})
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", unavailable(ctx, err))
	}
	relay, err := pgxpool.NewWithConfig(ctx, relayCfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect relay pool: %w", unavailable(ctx, err))
	}
	db := &DB{pool: pool, relay: relay, log: o.log, pooler: o.pooler, local: local, relayLocal: relayLocal,
		wake: wakeup.New(), logs: openSQL(pool, local), logWake: wakeup.New()}
	if err := db.main().QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&db.schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: ping: %w", unavailable(ctx, err))
	}
	switch {
	case listen != nil:
		db.listen = listen
	case o.pooler != PoolerTransaction:
		db.listen = pool.Config().ConnConfig.Copy()
	}
	db.channel = notifyChannel(db.schema)
	// NOTIFY is a statement of its own transaction, which every pooler
	// passes on; only LISTEN needs a session.
	db.notifier = newNotifier(relayCfg.ConnConfig, db.channel, db.log)
	return db, nil
}

// wakeRelays wakes the relays of this DB: those of this process at once,
// those of others through the DB's notifier.
func (db *DB) wakeRelays() {
	db.wake.Wake()
	db.notifier.notify()
}

// main returns the main pool for statements outside a unit of work.
func (db *DB) main() pooled { return pooled{pool: db.pool, set: db.local} }

// Pooler returns what the DB was told stands between it and PostgreSQL.
func (db *DB) Pooler() Pooler { return db.pooler }

// Listening reports whether the DB's relays hear at once of commits made by
// other processes: false behind a transaction pooler without
// [WithListenURL], where they find them at their next poll.
func (db *DB) Listening() bool { return db.listen != nil }

// Schema returns the schema the DB works in, as the server reported it
// when the DB was opened.
func (db *DB) Schema() string { return db.schema }

// CheckSchema returns an error unless every way the DB reaches the
// server, units of work, the relay's pool and the event log's database/sql,
// works in schema: the check that a pooler did not drop the search_path it
// was given.
func (db *DB) CheckSchema(ctx context.Context, schema string) error {
	var inTx, relay, logs string
	err := db.Runner(nil).Do(ctx, func(ctx context.Context, t uow.Tx) error {
		q, err := PgxTx(t)
		if err != nil {
			return err
		}
		return q.QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&inTx)
	})
	if err != nil {
		return fmt.Errorf("postgres: check schema: %w", err)
	}
	if err := (pooled{pool: db.relay, set: db.relayLocal}).QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&relay); err != nil {
		return fmt.Errorf("postgres: check schema: %w", err)
	}
	if err := db.logs.QueryRowContext(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&logs); err != nil {
		return fmt.Errorf("postgres: check schema: %w", err)
	}
	for _, got := range []struct{ where, schema string }{{"a unit of work", inTx}, {"the relay", relay}, {"the event log", logs}} {
		if got.schema != schema {
			return fmt.Errorf("postgres: %s works in schema %q, not %q: the search_path did not reach the server (a pooler drops or refuses it unless DATABASE_POOLER says which pooler it is)", got.where, got.schema, schema)
		}
	}
	return nil
}

// Close stops the notifier and closes both pools, waiting for connections
// in use to be returned. It returns the error of closing the event log's
// connections, which have nothing left to write by then.
func (db *DB) Close() error {
	if db.notifier != nil {
		db.notifier.close()
	}
	err := db.logs.Close()
	db.relay.Close()
	db.pool.Close()
	if err != nil {
		return fmt.Errorf("postgres: close: %w", err)
	}
	return nil
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

// Runner returns a unit-of-work runner ([Runner]) whose transactions take
// their time from now; nil means time.Now.
func (db *DB) Runner(now func() time.Time) uow.Runner {
	if now == nil {
		now = time.Now
	}
	return &Runner{db: db, now: now}
}

// Events returns the event store ([EventStore]).
func (db *DB) Events() eventstore.Store { return &EventStore{} }

// Outbox returns the outbox store ([Outbox]). Its bookkeeping runs on the
// relay pool; [Outbox.Add] runs in the unit of work's transaction. Every
// Outbox of one DB shares its wake-ups.
func (db *DB) Outbox() backend.Outbox {
	return &Outbox{pool: pooled{pool: db.relay, set: db.relayLocal}, channel: db.channel, db: db}
}

// Views returns the user views ([UserViews]), the read models that the
// domain's [user.ViewsProjection] writes.
func (db *DB) Views() user.Views { return UserViews{} }

// OrgViews returns the organizations domain's views ([OrgViews]).
func (db *DB) OrgViews() org.Views { return OrgViews{} }

// DataKeys returns the keyring's store of data keys ([DataKeys]).
func (db *DB) DataKeys() keyring.Store { return DataKeys{} }

// Migrate applies every migration that the database lacks and returns the
// versions it applied. Instances that migrate at once take turns on a
// [migrationLock]. It then keeps the event log in order on this
// cluster: after a logical copy of the database from another cluster
// (pg_dump and pg_restore, logical replication), whose transaction ids ran
// above this one's, it moves the log's clock on in one transaction, so
// that new events follow the copied ones and every projection goes on from
// its offset; it logs that it did. When it cannot, it returns an error and
// the app does not start.
func (db *DB) Migrate(ctx context.Context) ([]int64, error) {
	sqlDB := openSQL(db.pool, db.local)
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.Postgres(),
		goose.WithLocker(&migrationLock{id: lockID("migrations." + db.schema)}))
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
	move, err := db.alignClock(ctx)
	if err != nil {
		return applied, err
	}
	if move != nil {
		db.log.Warn("postgres: the database came from another cluster (a logical restore or replication); the event log's clock is set for this one, so that new events follow the copied ones",
			"from_system", move.FromSystem, "to_system", move.ToSystem, "from_shift", move.FromShift, "to_shift", move.ToShift, "sequences", move.Sequences)
	}
	return applied, nil
}

// migrationLock lets many instances start at once: one migrates while the
// others wait for its advisory lock, then find nothing to do. Its ID is the
// schema's, so that deployments (and tests) in other schemas of the
// database never wait for each other.
//
// The lock is a transaction's (pg_advisory_xact_lock), held by a
// transaction of its own that stays open while the migrations run on other
// connections, and released by its commit, or by the server when the
// connection breaks. A session's lock would not hold behind a transaction
// pooler: the lock would stay with a server session that the pooler hands
// to other clients, and the unlock could reach another session. A
// transaction keeps its server session until it ends, behind any pooler.
// A waiting instance tries again every [migrationLockPoll] in a short
// transaction, rather than waiting inside one: behind a transaction pooler
// each waiter would hold a server connection, and with as many waiters as
// the pooler has connections the migrations could get none.
type migrationLock struct {
	id int64
	tx *sql.Tx
}

// migrationLockPoll is the pause between two tries of a [migrationLock].
const migrationLockPoll = 100 * time.Millisecond

var _ lock.Locker = (*migrationLock)(nil)

func (l *migrationLock) Lock(ctx context.Context, db *sql.DB) error {
	for {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("postgres: lock migrations: %w", err)
		}
		var locked bool
		if err := tx.QueryRowContext(ctx, "SELECT pg_try_advisory_xact_lock($1)", l.id).Scan(&locked); err != nil {
			return fmt.Errorf("postgres: lock migrations: %w", errors.Join(err, tx.Rollback()))
		}
		if locked {
			l.tx = tx
			return nil
		}
		if err := tx.Rollback(); err != nil {
			return fmt.Errorf("postgres: lock migrations: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres: lock migrations: %w", ctx.Err())
		case <-time.After(migrationLockPoll):
		}
	}
}

func (l *migrationLock) Unlock(context.Context, *sql.DB) error {
	if l.tx == nil {
		return nil
	}
	tx := l.tx
	l.tx = nil
	if err := tx.Commit(); err != nil {
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
