package routerlog

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v3/pkg/sql"
)

func TestLoggerWritesOnlyWhatSlogsLevelLetsThrough(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))).
		With(watermill.LogFields{"handler": "h", "k": 0}).With(watermill.LogFields{"msg_uuid": "m"})
	l.Trace("traced", watermill.LogFields{"k": 1})
	l.Debug("debugged", nil)
	l.Info("informed", nil)
	l.Error("failed", errors.New("boom"), watermill.LogFields{"k": 2})
	out := buf.String()
	for _, hidden := range []string{"traced", "debugged", "informed"} {
		if strings.Contains(out, hidden) {
			t.Errorf("%q logged at level Info:\n%s", hidden, out)
		}
	}
	for _, want := range []string{"msg=failed", "boom", "handler=h", "msg_uuid=m", "k=2"} {
		if !strings.Contains(out, want) {
			t.Errorf("the error was logged without %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "k=0") {
		t.Errorf("a field of With was not replaced by the entry's own:\n%s", out)
	}

	buf.Reset()
	l = New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: watermill.LevelTrace})))
	l.Trace("traced", nil)
	l.Info("informed", nil)
	if out := buf.String(); !strings.Contains(out, "traced") || !strings.Contains(out, "level=DEBUG msg=informed") {
		t.Errorf("at the trace level, want the trace and Info at Debug:\n%s", out)
	}
}

// Watermill-sql logs its statements with their parameters; the log keeps
// the statements only, at every level and through With.
func TestLoggerKeepsNoSQLParameters(t *testing.T) {
	const statement = "SELECT * FROM events WHERE position > $1"
	for name, fields := range map[string]watermill.LogFields{
		"query and query_args":          {"query": statement, "query_args": []any{"secret-arg"}},
		"a watermill-sql query":         {"query": wsql.Query{Query: statement, Args: []any{"secret-arg"}}},
		"a pointer to one":              {"query": &wsql.Query{Query: statement, Args: []any{"secret-arg"}}},
		"arguments logged as the query": {"query": []any{"secret-arg"}},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			base := New(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: watermill.LevelTrace})))
			base.Trace("traced", fields)
			base.Debug("debugged", fields)
			base.Error("failed", errors.New("boom"), fields)
			base.With(fields).Info("with", nil)
			out := buf.String()
			if strings.Contains(out, "secret-arg") {
				t.Errorf("a parameter was logged:\n%s", out)
			}
			if strings.Count(out, "\n") != 4 {
				t.Errorf("want 4 lines:\n%s", out)
			}
			if _, ok := fields["query"].([]any); !ok && strings.Count(out, statement) != 4 {
				t.Errorf("want the statement on each line:\n%s", out)
			}
		})
	}
	// The caller's fields are left as they were.
	fields := watermill.LogFields{"query_args": []any{1}}
	New(slog.New(slog.NewTextHandler(io.Discard, nil))).Error("failed", nil, fields)
	if _, ok := fields["query_args"]; !ok {
		t.Error("the caller's fields lost query_args")
	}
}
