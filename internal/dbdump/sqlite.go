package dbdump

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // Registers the driver "sqlite".
)

// SQLite returns every row of every table of the SQLite database file at
// path, which it opens read-only for the while, failing t when it cannot
// read them.
func SQLite(t testing.TB, path string) []Row {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatalf("dbdump: open %s: %v", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT name FROM sqlite_schema WHERE type = 'table'`)
	if err != nil {
		t.Fatalf("dbdump: list the tables: %v", err)
	}
	var tables []string
	for rows.Next() {
		var table string
		if err := rows.Scan(&table); err != nil {
			t.Fatalf("dbdump: list the tables: %v", err)
		}
		tables = append(tables, table)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("dbdump: list the tables: %v", err)
	}
	rows.Close()
	slices.Sort(tables)
	var out []Row
	for _, table := range tables {
		out = append(out, sqliteTable(t, db, table)...)
	}
	return out
}

// sqliteTable returns the rows of table.
func sqliteTable(t testing.TB, db *sql.DB, table string) []Row {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT * FROM "`+strings.ReplaceAll(table, `"`, `""`)+`"`)
	if err != nil {
		t.Fatalf("dbdump: read %s: %v", table, err)
	}
	defer rows.Close()
	columns, err := rows.Columns()
	if err != nil {
		t.Fatalf("dbdump: read %s: %v", table, err)
	}
	var out []Row
	for rows.Next() {
		vals, ptrs := make([]any, len(columns)), make([]any, len(columns))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("dbdump: read %s: %v", table, err)
		}
		r := Row{Table: table, Columns: columns, Values: make([]string, len(columns))}
		for i, v := range vals {
			r.Values[i] = sqliteText(v)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("dbdump: read %s: %v", table, err)
	}
	sortRows(out)
	return out
}

// sqliteText returns the text of a value as the driver scans it.
func sqliteText(v any) string {
	switch v := v.(type) {
	case nil:
		return Null
	case []byte:
		return string(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(v)
	}
}
