package postgres_test

import (
	"testing"

	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

func TestDataKeys(t *testing.T) {
	t.Parallel()
	keyringtest.Run(t, func(t *testing.T) keyringtest.Harness {
		return keyringtest.Harness{Runner: pgtest.New(t).Runner(nil), Store: postgres.DataKeys{}}
	})
}
