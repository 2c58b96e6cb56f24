package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite" // Registers the driver "sqlite".

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

// pkg names this package in errors.
const pkg = "sqlite"

// defaultBusyTimeout is how long a connection waits for a lock that another
// process holds (or, for readers, a checkpoint) before it fails with
// SQLITE_BUSY, unless [WithBusyTimeout] says otherwise. Writers of this
// process never wait in it: they queue for the one write connection.
const defaultBusyTimeout = 10 * time.Second

// Option changes how [Open] opens a database.
type Option func(*options)

type options struct {
	busyTimeout time.Duration
	tp          trace.TracerProvider
}

// WithBusyTimeout makes connections wait up to d for a lock that another
// process holds before they give up with an error that wraps
// [uow.ErrUnavailable]; the default is 10 seconds. It is rounded down to
// the millisecond.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = d }
}

// maxReaders bounds the read-only pool.
const maxReaders = 4

// DB is one SQLite database file and the stores over it.
//
// It holds three pools on the file. The write pool has exactly one
// connection, in WAL mode with synchronous=FULL, so that a unit of work that
// has committed survives a crash of the machine; its transactions begin
// with BEGIN IMMEDIATE, taking the write lock at once, so that a unit of
// work never fails halfway when another process writes the same file. The
// relay's bookkeeping uses the same connection but commits without waiting
// for the disk (see [Outbox]). The read pool has read-only connections for
// read-only units of work ([Runner.Read]) and what needs no unit of work;
// their transactions begin with a deferred BEGIN and never wait for the
// writer. The log pool serves the subscribers of [DB.Log].
//
// A unit of work holds the write connection until it ends. Code inside a
// unit of work must therefore not wait for another write of the same DB,
// such as a nested [Runner.Do] or an [Outbox.Claim]: each reports an error
// instead of waiting for ever when it is given the unit of work's context.
type DB struct {
	write *sql.DB
	read  *sql.DB
	// logs is the pool of the subscribers of [DB.Log].
	logs *sql.DB
	// writeDSN opens connections like the write pool's, for [DB.Migrate].
	writeDSN string
	// logDSN opens the connections of the log's subscribers.
	logDSN string
	// relaxed makes the relay's bookkeeping commit with synchronous=NORMAL.
	relaxed bool
	// wake tells this DB's relays that a unit of work added messages, and
	// logWake its log's subscribers that one appended events.
	wake, logWake *wakeup.Fanout
	// handover passes the relays of this DB the messages of its units of
	// work ([Outbox.Add]).
	handover outbox.Handover
	// tr traces the units of work ([unitSpan]).
	tr trace.Tracer
}

var _ backend.Backend = (*DB)(nil)

// Open opens the database file at path, creating the file (not its folder),
// readable by its owner alone, when it does not exist, and checks that it
// answers. The file is put in WAL mode, which it keeps; foreign keys are
// enforced, and deleted content is overwritten (secure_delete), since
// outbox messages carry one-time codes.
func Open(ctx context.Context, path string, opts ...Option) (*DB, error) {
	if path == "" {
		return nil, errors.New("sqlite: open: empty path")
	}
	o := options{busyTimeout: defaultBusyTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	busyTimeout := fmt.Sprintf("busy_timeout(%d)", max(o.busyTimeout.Milliseconds(), 0))
	writeDSN := dsn(path, url.Values{
		"_pragma": {
			busyTimeout,
			"journal_mode(WAL)",
			"foreign_keys(1)",
			"synchronous(FULL)",
			// Deleted rows are overwritten, not left in free pages: an
			// outbox message holds a plain one-time code until delivered.
			"secure_delete(on)",
		},
		"_txlock": {"immediate"},
	})
	write, err := sql.Open("sqlite", writeDSN)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	// The write connection opens first: it creates the file and turns on
	// WAL mode, which read-only connections cannot do.
	if err := firstPing(ctx, write, o.busyTimeout); err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, unavailable(ctx, err))
	}
	read, err := sql.Open("sqlite", dsn(path, url.Values{
		"_pragma": {
			busyTimeout,
			"query_only(1)",
		},
	}))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	read.SetMaxOpenConns(maxReaders)
	read.SetMaxIdleConns(maxReaders)
	// The log's pool connects when a subscriber first needs it. Its
	// commits do not wait for the disk (synchronous NORMAL, in WAL mode): a
	// crash of the machine can undo the last of them, and each undoes a
	// projection's writes together with the offset that covers them, which
	// are applied again. The savepoint around each batch keeps its journal
	// in memory.
	logDSN := dsn(path, url.Values{
		"_pragma": {busyTimeout, "foreign_keys(1)", "synchronous(NORMAL)", "secure_delete(on)", "temp_store(MEMORY)"},
		"_txlock": {"immediate"},
	})
	logs, err := openLogPool(logDSN)
	if err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db := &DB{write: write, read: read, logs: logs, writeDSN: writeDSN, logDSN: logDSN, relaxed: true, wake: wakeup.New(), logWake: wakeup.New(), tr: tracer(o.tp)}
	if err := ping(ctx, db.read); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, unavailable(ctx, err))
	}
	return db, nil
}

// createPrivate creates an empty file at path, which SQLite takes for an
// empty database, readable and writable by its owner alone whatever the
// umask: until a mail is delivered its outbox message holds a one-time
// code in plain text. SQLite gives the file's journal and WAL the file's
// mode. A file that exists keeps its own.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// dsn returns the driver's name for the file at path with the parameters
// q: a file: URI, so that any character of path, even '?' or '#', names
// the file and none is taken for a parameter.
func dsn(path string, q url.Values) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// firstPing pings the write pool's first connection, trying again for up
// to busy while the file is busy. Turning on WAL mode takes a lock that
// SQLite does not wait for in its busy handler, so a file that another
// process is creating, or switching to WAL, answers SQLITE_BUSY at once.
func firstPing(ctx context.Context, write *sql.DB, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	pause := time.Millisecond
	for {
		err := ping(ctx, write)
		if err == nil || !isBusy(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// ping checks that the file can be read: it reads the schema, on page 1.
func ping(ctx context.Context, db *sql.DB) error {
	var n int
	return db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n)
}

// Close closes the pools. Units of work still running make it wait; the
// last connection to close checkpoints the write-ahead log into the file.
func (db *DB) Close() error {
	return errors.Join(db.logs.Close(), db.read.Close(), db.write.Close())
}

// Ping reports whether the database file can be read. It does not wait for
// the write connection, so a long unit of work does not make it fail. An
// error that says the file is locked wraps [uow.ErrUnavailable].
func (db *DB) Ping(ctx context.Context) error {
	if err := ping(ctx, db.read); err != nil {
		return fmt.Errorf("sqlite: ping: %w", unavailable(ctx, err))
	}
	return nil
}

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

// Outbox returns the outbox store ([Outbox]). [Outbox.Add] runs in the unit
// of work's transaction; the relay's bookkeeping runs on the write
// connection, the backlog's and operators' reads on the read pool. Every
// Outbox of one DB shares its wake-ups.
func (db *DB) Outbox() backend.Outbox { return &Outbox{db: db} }

// Views returns the user views ([UserViews]), the read models that the
// domain's [user.ViewsProjection] writes.
func (db *DB) Views() user.Views { return UserViews{} }

// OrgViews returns the organizations domain's views ([OrgViews]).
func (db *DB) OrgViews() org.Views { return OrgViews{} }

// DataKeys returns the keyring's store of data keys ([DataKeys]).
func (db *DB) DataKeys() keyring.Store { return DataKeys{} }

// Migrate applies every migration that the database lacks and returns the
// versions it applied.
//
// Migrate calls on one file, from this process or others, take turns on
// SQLite's write lock: the first applies the migrations and the others then
// find nothing to do. goose's version table is created under that lock
// first; then goose's run is one IMMEDIATE transaction, each migration a
// savepoint in it. A migration that fails is undone; the ones before it
// stay applied, as goose does everywhere.
func (db *DB) Migrate(ctx context.Context) ([]int64, error) {
	return db.migrate(ctx, migrations.Sqlite())
}

// migrate applies the migrations of fsys as [DB.Migrate] describes.
func (db *DB) migrate(ctx context.Context, fsys fs.FS) ([]int64, error) {
	sqlDB := sql.OpenDB(migrationConnector{driver: db.write.Driver(), dsn: db.writeDSN})
	defer sqlDB.Close()
	store, err := database.NewStore(database.DialectSQLite3, goose.DefaultTablename)
	if err != nil {
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	if err := createVersionTable(ctx, sqlDB, store); err != nil {
		return nil, fmt.Errorf("sqlite: migrate: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectCustom, sqlDB, fsys,
		goose.WithStore(store), goose.WithSessionLocker(migrationLock{}))
	if err != nil {
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			return nil, fmt.Errorf("sqlite: migrate: %w", partial.Err)
		}
		return nil, fmt.Errorf("sqlite: migrate: %w", err)
	}
	applied := make([]int64, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// createVersionTable creates goose's version table unless it exists,
// holding the write lock. goose itself checks for the table before it takes
// its session lock, so instances that start together on a new file would
// race to create it, and the losers would wait a second for goose's retry.
func createVersionTable(ctx context.Context, sqlDB *sql.DB, store database.Store) (err error) {
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	if err := (migrationLock{}).SessionLock(ctx, conn); err != nil {
		return err
	}
	var n int
	err = conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`,
		store.Tablename()).Scan(&n)
	if err == nil && n == 0 {
		err = store.CreateVersionTable(ctx, conn)
		if err == nil {
			err = store.Insert(ctx, conn, database.InsertRequest{Version: 0})
		}
	}
	if err != nil {
		_, rbErr := conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		return errors.Join(fmt.Errorf("create version table: %w", err), rbErr)
	}
	return (migrationLock{}).SessionUnlock(ctx, conn)
}

// migrationLock holds SQLite's write lock for the whole of a goose session:
// it begins an IMMEDIATE transaction on goose's connection, in which
// [migrationConn] turns goose's own transactions into savepoints, and
// commits it at the end.
type migrationLock struct{}

var _ lock.SessionLocker = migrationLock{}

func (migrationLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return fmt.Errorf("sqlite: lock migrations: %w", err)
	}
	return nil
}

// SessionUnlock commits what goose applied. A migration that failed was
// rolled back to its savepoint already.
func (migrationLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		return fmt.Errorf("sqlite: unlock migrations: %w", err)
	}
	return nil
}

// migrationConnector opens the connections of [DB.Migrate].
type migrationConnector struct {
	driver driver.Driver
	dsn    string
}

func (c migrationConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.driver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return migrationConn{conn}, nil
}

func (c migrationConnector) Driver() driver.Driver { return c.driver }

// migrationConn is a driver connection whose transactions are savepoints,
// for use inside the transaction that [migrationLock] begins; outside it, a
// savepoint begins and ends a transaction of its own, as BEGIN and COMMIT
// would. Statements go through the driver's Prepare.
type migrationConn struct{ driver.Conn }

func (c migrationConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c migrationConn) BeginTx(ctx context.Context, _ driver.TxOptions) (driver.Tx, error) {
	if err := c.exec(ctx, `SAVEPOINT migration`); err != nil {
		return nil, err
	}
	return migrationSavepoint{c}, nil
}

func (c migrationConn) exec(ctx context.Context, query string) error {
	stmt, err := c.Prepare(query)
	if err != nil {
		return err
	}
	defer stmt.Close()
	if s, ok := stmt.(driver.StmtExecContext); ok {
		_, err = s.ExecContext(ctx, nil)
	} else {
		_, err = stmt.Exec(nil)
	}
	return err
}

// migrationSavepoint is one of goose's transactions.
type migrationSavepoint struct{ c migrationConn }

func (s migrationSavepoint) Commit() error {
	return s.c.exec(context.Background(), `RELEASE migration`)
}

func (s migrationSavepoint) Rollback() error {
	return errors.Join(
		s.c.exec(context.Background(), `ROLLBACK TO migration`),
		s.c.exec(context.Background(), `RELEASE migration`),
	)
}
