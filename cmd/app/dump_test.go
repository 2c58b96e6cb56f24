package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// awaitDump waits until the dump of the database satisfies ok.
func awaitDump(t *testing.T, databaseURL, what string, ok func(dump string) bool) {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for !ok(dumpDatabase(t, databaseURL)) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", e2eWait, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dumpedRow is one row of a table, its values as text by column.
type dumpedRow struct {
	table  string
	values map[string]string
}

// dumpRows returns every row of every table of the database.
func dumpRows(t *testing.T, databaseURL string) []dumpedRow {
	t.Helper()
	d, err := parseDatabaseURL(databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	text := func(v any) string {
		if b, ok := v.([]byte); ok {
			return string(b)
		}
		if v != nil {
			if b, err := json.Marshal(v); err == nil && (strings.HasPrefix(string(b), "{") || strings.HasPrefix(string(b), "[")) {
				return string(b)
			}
		}
		return fmt.Sprint(v)
	}
	var out []dumpedRow
	if d.postgresURL != "" {
		conn, err := pgx.Connect(t.Context(), d.postgresURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		rows, err := conn.Query(t.Context(), `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range tables {
			rows, err := conn.Query(t.Context(), fmt.Sprintf(`SELECT * FROM %q`, table))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				r := dumpedRow{table: table, values: map[string]string{}}
				for i, f := range rows.FieldDescriptions() {
					r.values[f.Name] = text(vals[i])
				}
				out = append(out, r)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	db, err := sql.Open("sqlite", "file:"+d.sqlitePath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, table := range sqliteStrings(t, db, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1`) {
		rows, err := db.QueryContext(t.Context(), fmt.Sprintf(`SELECT * FROM %q`, table))
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
			r := dumpedRow{table: table, values: map[string]string{}}
			for i, c := range cols {
				r.values[c] = text(vals[i])
			}
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return out
}

// dumpDatabase returns every row of every table of the database
// ([dumpRows]), one line per row: its table, then its values as text in
// the order of their columns' names, separated by tabs.
func dumpDatabase(t *testing.T, databaseURL string) string {
	t.Helper()
	var sb strings.Builder
	for _, r := range dumpRows(t, databaseURL) {
		sb.WriteString(r.table)
		for _, c := range slices.Sorted(maps.Keys(r.values)) {
			sb.WriteString("\t" + r.values[c])
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func sqliteStrings(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
