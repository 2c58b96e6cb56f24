package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// LoadSince reads neither the table nor the whole stream: the head and
// the recent stretch come from the index of UNIQUE (stream, version), in
// its order, so that the walk from the head back stops at the first event
// before since (LIMIT 1 with no sort), before and after ANALYZE has
// described a long stream. since leaves out all but the last 1000 of its
// 20000 events.
func TestLoadSinceUsesIndexes(t *testing.T) {
	t.Parallel()
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, tc := range []struct {
			name  string
			query string
			args  []any
			index string
		}{
			{"the head", headQuery, []any{"hot"}, "INDEX sqlite_autoindex_events_"},
			{"the recent events", sinceQuery, []any{"hot", "hot", int64(19000)}, "INDEX sqlite_autoindex_events_"},
		} {
			plan := explain(t, db, tc.query, tc.args...)
			if strings.Contains(plan, "SCAN events") || strings.Contains(plan, "TEMP B-TREE") || !strings.Contains(plan, tc.index) {
				t.Errorf("%s, %s: the plan is %q, want a search of %s in its order", when, tc.name, plan, tc.index)
			}
		}
	}
	check("on an empty table")

	// 20000 events in the hot stream, recorded 1 to 20000 microseconds
	// after 1970, and 50 in each of 400 others.
	const fill = `
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?2)
INSERT INTO events (id, stream, version, type, data, recorded_at)
SELECT ?1 || '-' || n, ?1, n, 'test.happened', '{}', n FROM g`
	if _, err := db.write.ExecContext(t.Context(), fill, "hot", 20000); err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		if _, err := db.write.ExecContext(t.Context(), fill, fmt.Sprintf("other-%d", i), 50); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.write.ExecContext(t.Context(), `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	check("after ANALYZE")
}

// explain returns the details of EXPLAIN QUERY PLAN of query, one a line.
func explain(t *testing.T, db *DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.write.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
