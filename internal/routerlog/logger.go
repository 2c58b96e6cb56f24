package routerlog

import (
	"context"
	"log/slog"
	"maps"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v3/pkg/sql"
)

// Logger is Watermill's slog adapter with its Info lowered to Debug (a
// router says at Info what an operator does not need to see), which does
// nothing for a level slog would not write. Watermill's adapter turns its
// fields into slog attributes before slog checks the level, and its With
// makes slog format them at once; a router and its subscriber trace
// several times per message, and add a message's ID with With for each.
// Logger keeps the fields of With aside, and hands them over only for an
// entry that is written.
type Logger struct {
	base   watermill.LoggerAdapter
	log    *slog.Logger
	parent *Logger
	fields watermill.LogFields
}

// New returns the Watermill logger that writes to l.
func New(l *slog.Logger) *Logger {
	return &Logger{
		base: watermill.NewSlogLoggerWithLevelMapping(l, map[slog.Level]slog.Level{
			slog.LevelInfo: slog.LevelDebug,
		}),
		log: l,
	}
}

// Error logs at slog's Error level.
func (l *Logger) Error(msg string, err error, fields watermill.LogFields) {
	if l.enabled(slog.LevelError) {
		l.base.Error(msg, err, l.all(fields))
	}
}

// Info logs at slog's Debug level, if it is enabled.
func (l *Logger) Info(msg string, fields watermill.LogFields) {
	if l.enabled(slog.LevelDebug) {
		l.base.Info(msg, l.all(fields))
	}
}

// Debug logs at slog's Debug level, if it is enabled.
func (l *Logger) Debug(msg string, fields watermill.LogFields) {
	if l.enabled(slog.LevelDebug) {
		l.base.Debug(msg, l.all(fields))
	}
}

// Trace logs at Watermill's trace level, if it is enabled.
func (l *Logger) Trace(msg string, fields watermill.LogFields) {
	if l.enabled(watermill.LevelTrace) {
		l.base.Trace(msg, l.all(fields))
	}
}

// With returns a logger that adds fields to every entry.
func (l *Logger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return &Logger{base: l.base, log: l.log, parent: l, fields: fields}
}

func (l *Logger) enabled(level slog.Level) bool { return l.log.Enabled(context.Background(), level) }

// all returns the fields of l's With calls, outermost first, and then
// fields, a later one replacing an earlier of the same key, with no SQL
// parameters ([withoutParameters]).
func (l *Logger) all(fields watermill.LogFields) watermill.LogFields {
	if l.parent == nil && len(fields) == 0 {
		return nil
	}
	if l.parent == nil {
		return withoutParameters(maps.Clone(fields))
	}
	var chain []watermill.LogFields
	for at := l; at != nil; at = at.parent {
		chain = append(chain, at.fields)
	}
	out := watermill.LogFields{}
	for i := len(chain) - 1; i >= 0; i-- {
		maps.Copy(out, chain[i])
	}
	maps.Copy(out, fields)
	return withoutParameters(out)
}

// withoutParameters removes from fields the parameters of the SQL
// statements that watermill-sql's subscriber logs at Debug and trace
// levels, and keeps the statements: a statement is code, its parameters
// are data, which may one day be a person's. It drops "query_args", keeps
// a "query" that is a watermill-sql query as its statement alone, and
// drops a "query" that is anything but a statement (watermill-sql logs
// the parameters of its consumed-message query under that key).
func withoutParameters(fields watermill.LogFields) watermill.LogFields {
	delete(fields, "query_args")
	switch q := fields["query"].(type) {
	case nil, string:
	case wsql.Query:
		fields["query"] = q.Query
	case *wsql.Query:
		fields["query"] = q.Query
	default:
		delete(fields, "query")
	}
	return fields
}
