// Package pgtest gives each test a fresh, migrated PostgreSQL schema, so that
// tests run in parallel and never see what another test or an earlier run
// left behind.
//
// The server is the one at TEST_DATABASE_URL, by default the local
// PostgreSQL's database "test". A test that cannot reach it fails; it is
// never skipped.
package pgtest

import (
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/testproxy"
)

// DefaultURL is the server tests use when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the URL of the test server.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
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
	t.Cleanup(db.Close)
	return db, p
}
