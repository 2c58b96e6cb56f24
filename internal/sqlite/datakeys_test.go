package sqlite_test

import (
	"testing"

	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
)

func TestDataKeys(t *testing.T) {
	t.Parallel()
	keyringtest.Run(t, func(t *testing.T) keyringtest.Harness {
		return keyringtest.Harness{Runner: sqlitetest.New(t).Runner(nil), Store: sqlite.DataKeys{}}
	})
}
