package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/uow/uowtest"
)

func TestRunner(t *testing.T) {
	t.Parallel()
	uowtest.Run(t, func(t *testing.T) uowtest.Harness {
		db := pgtest.New(t)
		return uowtest.Harness{
			Runner: func(now func() time.Time) uow.Runner { return db.Runner(now) },
			Outbox: db.Outbox(),
			Events: db.Events(),
		}
	})
}

// PgxTx, by which the stores and this package's tests reach pgx, refuses a
// nil Tx; the suite sees that only through the stores.
func TestPgxTxRefusesNil(t *testing.T) {
	t.Parallel()
	if _, err := postgres.PgxTx(nil); !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("PgxTx(nil): %v, want ErrForeignTx", err)
	}
}

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
