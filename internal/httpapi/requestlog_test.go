package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/httpapi"
)

// TestRequestLog holds the line logged for each request to what
// docs/operations.md says of it: the values the client chose are
// clipped.
func TestRequestLog(t *testing.T) {
	t.Parallel()
	t.Run("untrusted values are clipped", testRequestLogClipsUntrustedValues)
}

// requestLine is what the tests read of a request's log line.
type requestLine struct {
	Msg    string `json:"msg"`
	Method string `json:"method"`
	Route  string `json:"route"`
	Path   string `json:"path"`
	Status int    `json:"status"`
}

// requestLog is a server whose log the test reads, one line a request.
type requestLog struct {
	h   http.Handler
	buf *syncBuffer
}

func newRequestLog(d httpapi.Deps) requestLog {
	buf := &syncBuffer{}
	d.Users = fakeUsers{}
	d.Log = slog.New(slog.NewJSONHandler(buf, nil))
	return requestLog{h: httpapi.NewServer(d), buf: buf}
}

// send sends one request and returns its log line, raw and read.
func (l requestLog) send(t *testing.T, method, target, remote string, header map[string]string) (string, requestLine) {
	t.Helper()
	before := len(l.buf.Bytes())
	serve(t, l.h, method, target, remote, header, nil)
	raw := strings.TrimSpace(string(l.buf.Bytes()[before:]))
	if strings.Count(raw, "\n") != 0 {
		t.Fatalf("%s %.40s: want one log line, got\n%s", method, target, raw)
	}
	var line requestLine
	if err := json.Unmarshal([]byte(raw), &line); err != nil || line.Msg != "http" {
		t.Fatalf("%s %.40s: log line %q (%v), want the request's", method, target, raw, err)
	}
	return raw, line
}

// testRequestLogClipsUntrustedValues: a path of a megabyte, or a method of
// many kilobytes, is logged as its first few hundred bytes, cut where a
// character starts; a short one whole.
func testRequestLogClipsUntrustedValues(t *testing.T) {
	t.Parallel()
	l := newRequestLog(httpapi.Deps{})
	long := "/" + strings.Repeat("a", 1<<20)
	for _, c := range []struct{ name, method, target, path string }{
		{"a long path", "GET", long, long},
		{"a long path of many-byte characters", "GET", "/" + strings.Repeat("é", 1<<15), "/" + strings.Repeat("é", 1<<15)},
		{"a long method", strings.Repeat("M", 1<<16), "/v1/me", "/v1/me"},
	} {
		raw, line := l.send(t, c.method, c.target, "192.0.2.1:1000", nil)
		if len(raw) > 2<<10 {
			t.Errorf("%s: the log line has %d bytes, want at most 2 KiB", c.name, len(raw))
		}
		for _, f := range []struct{ name, got, sent string }{{"path", line.Path, c.path}, {"method", line.Method, c.method}} {
			kept, cut := strings.CutSuffix(f.got, "…")
			if len(f.sent) > 1<<10 && (!cut || len(kept) < 64 || !strings.HasPrefix(f.sent, kept)) {
				t.Errorf("%s: %s logged as %.80q (%d bytes), want the start of what was sent and an ellipsis", c.name, f.name, f.got, len(f.got))
			}
			if len(f.sent) <= 1<<10 && f.got != f.sent {
				t.Errorf("%s: %s logged as %q, want %q", c.name, f.name, f.got, f.sent)
			}
		}
	}
}
