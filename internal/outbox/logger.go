package outbox

import (
	"context"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill"
)

// routerLogger is the logger of the relay's router: Watermill's slog adapter,
// with its Info lowered to Debug, whose Trace does nothing unless the trace
// level is enabled. Watermill's adapter turns its fields into slog
// attributes before slog checks the level, and its router traces twice per
// message.
type routerLogger struct {
	watermill.LoggerAdapter
	log *slog.Logger
}

func newRouterLogger(l *slog.Logger) routerLogger {
	return routerLogger{
		LoggerAdapter: watermill.NewSlogLoggerWithLevelMapping(l, map[slog.Level]slog.Level{
			slog.LevelInfo: slog.LevelDebug,
		}),
		log: l,
	}
}

// Trace logs at Watermill's trace level, if it is enabled.
func (l routerLogger) Trace(msg string, fields watermill.LogFields) {
	if l.log.Enabled(context.Background(), watermill.LevelTrace) {
		l.LoggerAdapter.Trace(msg, fields)
	}
}

// With returns a logger with fields added to every entry.
func (l routerLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return routerLogger{LoggerAdapter: l.LoggerAdapter.With(fields), log: l.log}
}
