package sqlite_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/sqlite"
)

// userViewTables are the projection tables of [sqlite.UserViews], each
// with the order of its primary key.
var userViewTables = []struct{ name, key string }{
	{"users", "id"},
	{"sessions", "token_hash"},
	{"signin_codes", "code_hash"},
	{"email_change_codes", "code_hash"},
	{"email_undo_codes", "code_hash"},
	// No event makes it, and a rebuild leaves it as it is.
	{"session_uses", "token_hash"},
}

// snapshotUserViews returns every row of every projection table, all
// columns in their text form, ordered by primary key.
func snapshotUserViews(t *testing.T, db *sqlite.DB) map[string][]string {
	t.Helper()
	snap := map[string][]string{}
	for _, table := range userViewTables {
		rows, err := sqlite.WriteDB(db).QueryContext(t.Context(),
			fmt.Sprintf(`SELECT * FROM %s ORDER BY %s`, table.name, table.key))
		if err != nil {
			t.Fatal(err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				parts[i] = fmt.Sprint(v)
			}
			snap[table.name] = append(snap[table.name], "("+strings.Join(parts, ",")+")")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return snap
}
