package postgres

import (
	"context"

	"github.com/pressly/goose/v3"

	"github.com/eventsourced/accounts/migrations"
)

// MigrateTo applies the migrations up to version and no further, as a
// release before the later ones leaves the database, for the tests of an
// upgrade.
func (db *DB) MigrateTo(ctx context.Context, version int64) error {
	sqlDB := openSQL(db.pool, db.local)
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.Postgres())
	if err != nil {
		return err
	}
	_, err = provider.UpTo(ctx, version)
	return err
}
