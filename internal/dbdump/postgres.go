package dbdump

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Querier runs a query on PostgreSQL: a *pgx.Conn, a *pgxpool.Pool, a
// *pgxpool.Conn or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Postgres returns every row of every base table of q's current schema,
// failing t when it cannot read them.
func Postgres(t testing.TB, q Querier) []Row {
	t.Helper()
	rows, err := q.Query(t.Context(), `SELECT table_name FROM information_schema.tables
WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatalf("dbdump: list the tables: %v", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("dbdump: list the tables: %v", err)
	}
	slices.Sort(tables)
	var out []Row
	for _, table := range tables {
		out = append(out, postgresTable(t, q, table)...)
	}
	return out
}

// postgresTable returns the rows of table.
func postgresTable(t testing.TB, q Querier, table string) []Row {
	t.Helper()
	// Every column in the text format but bytea, whose bytes are read as
	// they are; the statement is described first, whatever the
	// connection's default mode, for the formats to apply by type.
	rows, err := q.Query(t.Context(), `SELECT * FROM `+pgx.Identifier{table}.Sanitize(),
		pgx.QueryExecModeDescribeExec, pgx.QueryResultFormatsByOID{pgtype.ByteaOID: pgx.BinaryFormatCode})
	if err != nil {
		t.Fatalf("dbdump: read %s: %v", table, err)
	}
	defer rows.Close()
	var columns []string
	for _, f := range rows.FieldDescriptions() {
		columns = append(columns, f.Name)
	}
	var out []Row
	for rows.Next() {
		r := Row{Table: table, Columns: columns, Values: make([]string, len(columns))}
		for i, raw := range rows.RawValues() {
			r.Values[i] = Null
			if raw != nil {
				r.Values[i] = string(raw)
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("dbdump: read %s: %v", table, err)
	}
	sortRows(out)
	return out
}
