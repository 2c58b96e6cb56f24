package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// The upgrade that records the master keys records those of the keys
// already there, without a check: a start with another key under the ID
// is refused, and the first with the right key gives the record its check.
func TestAnUpgradeRecordsTheMasterKeysOfTheKeysThere(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := postgres.Open(ctx, pgtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const before = 17 // the last migration before data_key_masters
	if err := db.MigrateTo(ctx, before); err != nil {
		t.Fatal(err)
	}
	ring := func(dataKey string) *keyring.Keyring {
		m, err := keyring.ParseMasters(dataKey)
		if err != nil {
			t.Fatal(err)
		}
		k, err := keyring.New(m, postgres.DataKeys{})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	old, other := ring("old:"+strings.Repeat("A", 43)), ring("old:"+strings.Repeat("C", 43))
	do := func(fn func(ctx context.Context, tx uow.Tx) error) error { return db.Runner(nil).Do(ctx, fn) }
	if err := do(func(ctx context.Context, tx uow.Tx) error {
		_, err := old.Seal(ctx, tx, "user:1", "ada@example.com")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	records := func() []keyring.MasterCheck {
		var r []keyring.MasterCheck
		if err := do(func(ctx context.Context, tx uow.Tx) error {
			var err error
			r, err = postgres.DataKeys{}.Masters(ctx, tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := records(); len(r) != 1 || r[0].Master != "old" || r[0].Check != nil {
		t.Fatalf("records after the upgrade: %+v, want old without a check", r)
	}
	var me *keyring.MastersError
	if err := do(func(ctx context.Context, tx uow.Tx) error { return other.Check(ctx, tx) }); !errors.As(err, &me) || len(me.Other) != 1 {
		t.Errorf("Check with another key under the ID old: %v, want it refused", err)
	}
	if err := do(func(ctx context.Context, tx uow.Tx) error { return old.Check(ctx, tx) }); err != nil {
		t.Fatalf("Check with the key of the stored keys: %v", err)
	}
	if r := records(); len(r) != 1 || r[0].Check == nil {
		t.Errorf("records after the first check: %+v, want old with its check", r)
	}
}
