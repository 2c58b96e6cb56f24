package routerlog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
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
