package logctx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/logctx"
	"github.com/eventsourced/accounts/internal/requestid"
)

// line logs one line through a logctx handler over JSON with ctx, and
// returns it decoded.
func line(t *testing.T, ctx context.Context, log func(*slog.Logger) *slog.Logger) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	l := slog.New(logctx.New(slog.NewJSONHandler(&buf, nil)))
	if log != nil {
		l = log(l)
	}
	l.InfoContext(ctx, "hello", "n", 1)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("log line %q: %v", buf.Bytes(), err)
	}
	return got
}

func TestHandler(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	traced := trace.ContextWithSpanContext(context.Background(), sc)
	for _, c := range []struct {
		name string
		ctx  context.Context
		log  func(*slog.Logger) *slog.Logger
		want map[string]string
	}{
		{name: "bare context", ctx: context.Background(), want: map[string]string{}},
		{name: "request ID", ctx: requestid.With(context.Background(), "r-1"),
			want: map[string]string{"request_id": "r-1"}},
		{name: "span context", ctx: traced,
			want: map[string]string{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}},
		{name: "both, after WithAttrs", ctx: requestid.With(traced, "r-2"),
			log:  func(l *slog.Logger) *slog.Logger { return l.With("component", "x") },
			want: map[string]string{"request_id": "r-2", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "component": "x"}},
		{name: "invalid span context", ctx: trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}),
			want: map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := line(t, c.ctx, c.log)
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %q (line %v)", k, got[k], v, got)
				}
			}
			for _, k := range []string{logctx.KeyRequestID, logctx.KeyTraceID, logctx.KeySpanID} {
				if _, want := c.want[k]; !want && got[k] != nil {
					t.Errorf("%s = %v, want none (line %v)", k, got[k], got)
				}
			}
			if got["msg"] != "hello" || got["n"] != float64(1) {
				t.Errorf("the line lost its own message or attributes: %v", got)
			}
		})
	}
}

// TestHandlerLeavesTheRecordAlone: a record handed on twice, as a fan-out
// does, is not changed by the first for the second.
func TestHandlerLeavesTheRecordAlone(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := logctx.New(slog.NewJSONHandler(&buf, nil))
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "hello", 0)
	r.AddAttrs(slog.Int("a", 1), slog.Int("b", 2), slog.Int("c", 3), slog.Int("d", 4), slog.Int("e", 5), slog.Int("f", 6), slog.Int("g", 7))
	r.AddAttrs(slog.Int("h", 8)) // leaves room past the record's attributes
	ctx := requestid.With(context.Background(), "r-3")
	for range 2 {
		if err := h.Handle(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 || !bytes.Equal(lines[0], lines[1]) || bytes.Contains(buf.Bytes(), []byte("BUG")) {
		t.Errorf("the second line differs from the first:\n%s", buf.Bytes())
	}
	if bytes.Count(lines[0], []byte(`"request_id":"r-3"`)) != 1 {
		t.Errorf("want one request_id: %s", lines[0])
	}
}
