package main

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/dbdump"
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

// dumpRows returns every row of every table of the database at
// databaseURL, a DATABASE_URL of the app.
func dumpRows(t *testing.T, databaseURL string) []dbdump.Row {
	t.Helper()
	d, err := parseDatabaseURL(databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	if d.postgresURL == "" {
		return dbdump.SQLite(t, d.sqlitePath)
	}
	conn, err := pgx.Connect(t.Context(), d.postgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	return dbdump.Postgres(t, conn)
}

// dumpDatabase returns every row of every table of the database
// ([dumpRows]), one a line, as [dbdump.Text] renders them.
func dumpDatabase(t *testing.T, databaseURL string) string {
	t.Helper()
	return dbdump.Text(dumpRows(t, databaseURL))
}
