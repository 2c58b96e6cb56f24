package dbdump_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/dbdump"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// schema makes two tables and a view, on both backends, whose rows are
// written out of order.
var schema = []string{
	`CREATE TABLE b (id integer, email text, note text, sealed bytea)`,
	`CREATE TABLE a (id integer, name text)`,
	`CREATE VIEW v AS SELECT * FROM a`,
	`INSERT INTO b VALUES (2, 'bob@example.com', 'b', 'bob@example.com')`,
	`INSERT INTO b VALUES (10, 'cy@example.com', NULL, NULL)`,
	`INSERT INTO b VALUES (1, 'ada@example.com', 'a', 'ada@example.com')`,
	`INSERT INTO a VALUES (1, 'one')`,
}

// want is the text of what schema wrote: the tables by name, the rows by
// their values' text, a NULL as \N, the bytes of a bytea as they are, and
// no view.
const want = "a\t1\tone\n" +
	"b\t1\tada@example.com\ta\tada@example.com\n" +
	"b\t10\tcy@example.com\t\\N\t\\N\n" +
	"b\t2\tbob@example.com\tb\tbob@example.com\n"

func TestPostgres(t *testing.T) {
	t.Parallel()
	conn, err := pgx.Connect(t.Context(), pgtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, q := range append(schema,
		`CREATE TABLE c (u uuid, j jsonb, at timestamptz)`,
		`INSERT INTO c VALUES ('0196a4a8-5e1c-7a2b-9c3d-4e5f60718293', '{"to":"dee@example.com"}', '2031-03-04 05:06:07+00')`,
		`SET TIME ZONE 'UTC'`,
	) {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows := dbdump.Postgres(t, conn)
	if got := dbdump.Text(rows[:len(rows)-1]); got != want {
		t.Errorf("the dump is\n%s\nwant\n%s", got, want)
	}
	// PostgreSQL's text form of each type.
	c := rows[len(rows)-1]
	for column, want := range map[string]string{
		"u":  "0196a4a8-5e1c-7a2b-9c3d-4e5f60718293",
		"j":  `{"to": "dee@example.com"}`,
		"at": "2031-03-04 05:06:07+00",
	} {
		if got, ok := c.Value(column); got != want || !ok {
			t.Errorf("the dump's %s.%s is %q (%t), want %q", c.Table, column, got, ok, want)
		}
	}
	if _, ok := c.Value("none"); ok {
		t.Error("Value found a column the table lacks")
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for _, q := range append(schema,
		`CREATE TABLE c (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL)`,
		`INSERT INTO c (at) VALUES (1.5)`,
	) {
		if _, err := db.ExecContext(t.Context(), strings.ReplaceAll(q, "bytea", "BLOB")); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The bytes of a BLOB, as a bytea's.
	if _, err := db.ExecContext(t.Context(), `UPDATE b SET sealed = CAST(sealed AS BLOB)`); err != nil {
		t.Fatal(err)
	}
	// SQLite's own tables are tables too.
	want := want + "c\t1\t1.5\nsqlite_sequence\tc\t1\n"
	if got := dbdump.Text(dbdump.SQLite(t, path)); got != want {
		t.Errorf("the dump is\n%s\nwant\n%s", got, want)
	}
}
