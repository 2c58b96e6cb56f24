// Package pgtest gives each test a fresh, migrated PostgreSQL schema, so that
// tests run in parallel and never see what another test or an earlier run
// left behind.
//
// The server is the one at TEST_DATABASE_URL, by default the local
// PostgreSQL's database "test", which is created when the server lacks it.
// A test that cannot reach it fails; it is never skipped.
package pgtest

import (
	"context"
	"errors"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/testproxy"
)

// DefaultURL is the server tests use when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the URL of the test server, whose database exists.
func URL() string {
	u := DefaultURL
	if env := os.Getenv("TEST_DATABASE_URL"); env != "" {
		u = env
	}
	ensureOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A failure shows when the test connects, with the server's
		// own words.
		_ = ensureDatabase(ctx, u)
	})
	return u
}

var ensureOnce sync.Once

// ensureDatabase creates the database that u names unless it exists,
// connecting to the server's "postgres" database to do so. Concurrent test
// processes may race to create it; the loser finds it made.
func ensureDatabase(ctx context.Context, u string) error {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return err
	}
	name := cfg.Database
	if name == "" || name == "postgres" {
		return nil
	}
	if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		return conn.Close(ctx)
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database
		return nil
	}
	return err
}

// New returns a [postgres.DB] on a fresh, migrated schema, opened with
// opts, closed and dropped when t ends.
func New(t testing.TB, opts ...postgres.Option) *postgres.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, drop, err := postgres.OpenScratch(ctx, URL(), "test_", opts...)
	if err != nil {
		t.Fatalf("pgtest: %v (set TEST_DATABASE_URL to use another server than %s)", err, URL())
	}
	dropAtEnd(t, drop)
	return db
}

// NewURL creates an empty schema, dropped when t ends, and returns a URL
// whose connections use it, for tests of code that opens its own database
// from a URL.
func NewURL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(URL())
	if err != nil {
		t.Fatalf("pgtest: TEST_DATABASE_URL must be a postgres:// URL: %v", err)
	}
	schema := newSchema(ctx, t)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// newSchema creates an empty schema, dropped when t ends, and returns its
// name.
func newSchema(ctx context.Context, t testing.TB) string {
	t.Helper()
	schema, drop, err := postgres.CreateSchema(ctx, URL(), "test_")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dropAtEnd(t, drop)
	return schema
}

// dropAtEnd calls drop when t ends.
func dropAtEnd(t testing.TB, drop func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Error(err)
		}
	})
}

// NewUnflushed is [New] with synchronous_commit off: a commit does not
// wait for the disk, whose flush varies by more than a timing test looks
// for (on the machines here it moved a command's median from 0.31 to 4.7
// ms).
func NewUnflushed(t testing.TB) *postgres.DB {
	t.Helper()
	u, err := url.Parse(NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	db, err := postgres.Open(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}

// NewCut is [New] on a database that the test can take away: cut closes
// every connection of the DB and refuses new ones from then on, as a server
// does that went down. It is [NewBehindProxy] for tests that never bring
// the database back.
func NewCut(t testing.TB) (db *postgres.DB, cut func()) {
	t.Helper()
	db, p := NewBehindProxy(t)
	return db, p.Down
}

// NewBehindProxy returns a [postgres.DB] on a fresh, migrated schema, as
// [New] does, whose connections pass through a [testproxy.Proxy]: the test
// makes the database go away with Down and come back with Up.
func NewBehindProxy(t testing.TB) (*postgres.DB, *testproxy.Proxy) {
	t.Helper()
	db, p := OpenBehindProxy(t, NewURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return db, p
}

// OpenBehindProxy opens the database at rawURL, a URL of [NewURL], through
// a proxy of its own, closed when t ends, as another process would open it.
func OpenBehindProxy(t testing.TB, rawURL string) (*postgres.DB, *testproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	p := testproxy.New(t, u.Host)
	u.Host = p.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, p
}
