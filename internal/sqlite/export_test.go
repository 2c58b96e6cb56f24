package sqlite

import (
	"context"
	"database/sql"
	"io/fs"
)

// WriteDB returns the write pool of db, for tests that look at the file
// directly. Code in a test must not hold it while a unit of work runs.
func WriteDB(db *DB) *sql.DB { return db.write }

// SetRelaxedBookkeeping sets whether the relay's bookkeeping commits with
// synchronous=NORMAL, for the benchmark that measures it.
func SetRelaxedBookkeeping(db *DB, on bool) { db.relaxed = on }

// MigrateFS applies the migrations of fsys as [DB.Migrate] applies the
// embedded ones.
func MigrateFS(ctx context.Context, db *DB, fsys fs.FS) ([]int64, error) {
	return db.migrate(ctx, fsys)
}
