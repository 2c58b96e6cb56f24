// Package migrations holds the numbered SQL migrations of each backend,
// embedded in the binary so that `app migrate` and the app's start apply
// them with nothing but the binary at hand.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Postgres returns the PostgreSQL migrations, named NNNNN_description.sql.
func Postgres() fs.FS { return sub("postgres") }

// Sqlite returns the SQLite migrations, named NNNNN_description.sql.
func Sqlite() fs.FS { return sub("sqlite") }

func sub(dir string) fs.FS {
	sub, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // The folder is embedded above; a missing one cannot build.
	}
	return sub
}
