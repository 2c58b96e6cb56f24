// Package sqlitetest gives each test a fresh, migrated SQLite database file.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/sqlite"
)

// New returns a [sqlite.DB] on a fresh, migrated file in t.TempDir(),
// closed when t ends.
func New(t testing.TB) *sqlite.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "test.db"))
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
