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

// New returns a [postgres.DB] on a fresh, migrated schema, closed and
// dropped when t ends.
func New(t testing.TB) *postgres.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, drop, err := postgres.OpenScratch(ctx, URL(), "test_")
	if err != nil {
		t.Fatalf("pgtest: %v (set TEST_DATABASE_URL to use another server than %s)", err, URL())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Error(err)
		}
	})
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
	schema, drop, err := postgres.CreateSchema(ctx, URL(), "test_")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Error(err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// NewBehindProxy returns a [postgres.DB] on a fresh, migrated schema, as
// [New] does, whose connections pass through a [testproxy.Proxy]: the test
// makes the database go away with Down and come back with Up.
func NewBehindProxy(t testing.TB) (*postgres.DB, *testproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(NewURL(t))
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
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return db, p
}
