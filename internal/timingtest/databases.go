package timingtest

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
)

// A commit that waits for a disk varies by more than what a timing test
// looks for (on the machines here the flush moved PostgreSQL's median
// from 0.31 to 4.7 ms), so the databases of a timing test wait for none.

// Postgres returns a fresh, migrated PostgreSQL database, closed and
// removed when t ends, whose commits do not wait for the disk
// (synchronous_commit off).
func Postgres(t testing.TB) *postgres.DB {
	t.Helper()
	u, err := url.Parse(pgtest.NewURL(t))
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

// SQLite returns a fresh, migrated SQLite database, removed when t ends,
// in a file in memory (/dev/shm) where the machine has one.
func SQLite(t testing.TB) *sqlite.DB {
	t.Helper()
	dir := t.TempDir()
	if memory, err := os.MkdirTemp("/dev/shm", "timing-"); err == nil {
		dir = memory
		t.Cleanup(func() { _ = os.RemoveAll(memory) })
	}
	return sqlitetest.NewAt(t, filepath.Join(dir, "timing.db"))
}
