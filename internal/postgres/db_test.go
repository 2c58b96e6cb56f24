package postgres_test

import (
	"testing"

	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// TestMigrate checks the migrations of a database, as its SQLite twin
// does; what they do to the event log's clock is TestLogicalRestore's.
func TestMigrate(t *testing.T) {
	t.Parallel()
	t.Run("Concurrent", testConcurrentMigrations)
}

// Instances that start together all migrate at once; a lock lets one do it
// while the others wait and then find nothing to do.
func testConcurrentMigrations(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	errs := make(chan error, 4)
	start := make(chan struct{})
	for range 4 {
		go func() {
			<-start
			db, err := postgres.Open(t.Context(), url)
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			_, err = db.Migrate(t.Context())
			errs <- err
		}()
	}
	close(start)
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
