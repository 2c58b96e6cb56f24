package dbdump

import (
	"slices"
	"strings"
)

// Null is the text of a NULL value, as in PostgreSQL's COPY text format.
const Null = `\N`

// Row is one row of a table.
type Row struct {
	Table string
	// Columns are the names of the table's columns, in the table's order.
	Columns []string
	// Values are the row's values as text, in the order of Columns.
	Values []string
}

// Value returns the text of the row's value in column, and false when the
// table has no such column.
func (r Row) Value(column string) (string, bool) {
	i := slices.Index(r.Columns, column)
	if i < 0 {
		return "", false
	}
	return r.Values[i], true
}

// String returns the row as one line of [Text], without its newline: the
// table's name, then each value, separated by tabs.
func (r Row) String() string {
	return r.Table + "\t" + strings.Join(r.Values, "\t")
}

// Text returns rows one a line, each as [Row.String] renders it.
func Text(rows []Row) string {
	var sb strings.Builder
	for _, r := range rows {
		sb.WriteString(r.String())
		sb.WriteString("\n")
	}
	return sb.String()
}

// sortRows puts the rows of one table in the order of their values.
func sortRows(rows []Row) {
	slices.SortFunc(rows, func(a, b Row) int {
		return slices.Compare(a.Values, b.Values)
	})
}
