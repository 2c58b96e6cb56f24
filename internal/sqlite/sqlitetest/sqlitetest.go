// Package sqlitetest gives each test a fresh, migrated SQLite database file.
package sqlitetest

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/sqlite"
)

// New returns a [sqlite.DB] on a fresh, migrated file in t.TempDir(),
// opened with opts and closed when t ends.
func New(t testing.TB, opts ...sqlite.Option) *sqlite.DB {
	t.Helper()
	return NewAt(t, filepath.Join(t.TempDir(), "test.db"), opts...)
}

// NewInMemory is [New] on a file in memory (/dev/shm) where the machine
// has one, so that a commit waits for no disk, for the timing tests.
func NewInMemory(t testing.TB) *sqlite.DB {
	t.Helper()
	dir := t.TempDir()
	if memory, err := os.MkdirTemp("/dev/shm", "sqlitetest-"); err == nil {
		dir = memory
		t.Cleanup(func() { _ = os.RemoveAll(memory) })
	}
	return NewAt(t, filepath.Join(dir, "test.db"))
}

// NewAt is [New] on the file at path, for tests that open the file a second
// time, as another process would.
func NewAt(t testing.TB, path string, opts ...sqlite.Option) *sqlite.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlite.Open(ctx, path, opts...)
	if err != nil {
		t.Fatalf("sqlitetest: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("sqlitetest: %v", err)
	}
	return db
}

// HoldWriteLock takes SQLite's write lock on the file at path from a
// connection of its own, as another process that writes would, and holds
// it until release is called or t ends.
func HoldWriteLock(t testing.TB, path string) (release func()) {
	t.Helper()
	other, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath())
	if err != nil {
		t.Fatalf("sqlitetest: %v", err)
	}
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatalf("sqlitetest: %v", err)
	}
	if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatalf("sqlitetest: take the write lock: %v", err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
				t.Errorf("sqlitetest: release the write lock: %v", err)
			}
			_ = conn.Close()
			_ = other.Close()
		})
	}
	t.Cleanup(release)
	return release
}
