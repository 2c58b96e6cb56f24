// Package routerlog adapts slog to the logger of Watermill's routers and
// subscribers.
package routerlog

import (
	"context"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill"
)

// Logger is Watermill's slog adapter with its Info lowered to Debug (a
// router says at Info what an operator does not need to see), and whose
// Debug and Trace do nothing unless slog would write them: Watermill's
// adapter turns its fields into slog attributes before slog checks the
// level, and a router and its subscriber trace several times per message.
type Logger struct {
	watermill.LoggerAdapter
	log *slog.Logger
}

// New returns the Watermill logger that writes to l.
func New(l *slog.Logger) Logger {
	return Logger{
		LoggerAdapter: watermill.NewSlogLoggerWithLevelMapping(l, map[slog.Level]slog.Level{
			slog.LevelInfo: slog.LevelDebug,
		}),
		log: l,
	}
}

// Info logs at slog's Debug level, if it is enabled.
func (l Logger) Info(msg string, fields watermill.LogFields) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.LoggerAdapter.Info(msg, fields)
	}
}

// Debug logs at slog's Debug level, if it is enabled.
func (l Logger) Debug(msg string, fields watermill.LogFields) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.LoggerAdapter.Debug(msg, fields)
	}
}

// Trace logs at Watermill's trace level, if it is enabled.
func (l Logger) Trace(msg string, fields watermill.LogFields) {
	if l.log.Enabled(context.Background(), watermill.LevelTrace) {
		l.LoggerAdapter.Trace(msg, fields)
	}
}

// With returns a logger with fields added to every entry.
func (l Logger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return Logger{LoggerAdapter: l.LoggerAdapter.With(fields), log: l.log}
}
