package postgres

import "testing"

// RelaySettings returns the settings that the statements of db's relay run
// with.
func RelaySettings(t testing.TB, db *DB) map[string]string {
	t.Helper()
	var sort, bitmap, commit, path string
	err := db.Outbox().(*Outbox).pool.QueryRow(t.Context(), `SELECT current_setting('enable_sort'), current_setting('enable_bitmapscan'),
current_setting('synchronous_commit'), current_setting('search_path')`).Scan(&sort, &bitmap, &commit, &path)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"enable_sort": sort, "enable_bitmapscan": bitmap, "synchronous_commit": commit, "search_path": path}
}

// MigrationLockID returns the advisory lock ID of the migrations of schema.
func MigrationLockID(schema string) int64 { return lockID("migrations." + schema) }
