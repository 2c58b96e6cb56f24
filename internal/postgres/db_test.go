package postgres_test

import (
	"testing"

	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// Instances that start together all migrate at once; a lock lets one do it
// while the others wait and then find nothing to do.
func TestConcurrentMigrations(t *testing.T) {
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
