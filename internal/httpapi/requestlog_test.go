package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/testclock"
)

// TestRequestLog holds the line logged for each request to what
// docs/operations.md and docs/personal-data.md say of it: the values the
// client chose are clipped, and the client is named by a keyed hash that
// changes each day, never by its address.
func TestRequestLog(t *testing.T) {
	t.Parallel()
	t.Run("untrusted values are clipped", testRequestLogClipsUntrustedValues)
	t.Run("the client is named, not its address", testRequestLogNamesClients)
}

// requestLine is what the tests read of a request's log line.
type requestLine struct {
	Msg    string `json:"msg"`
	Method string `json:"method"`
	Route  string `json:"route"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	Client string `json:"client"`
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

// testRequestLogNamesClients: each line names its client by 16 hex digits,
// the same for one client all day, another for another client, for the
// same client on the next day (UTC) and in another instance; and holds no
// address of the client's.
func testRequestLogNamesClients(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Date(2031, time.March, 4, 0, 0, 0, 0, time.UTC))
	deps := httpapi.Deps{Now: clock.Now, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	l := newRequestLog(deps)
	name := func(l requestLog, remote string, header map[string]string) string {
		t.Helper()
		raw, line := l.send(t, "GET", "/healthz", remote, header)
		if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(line.Client) {
			t.Fatalf("client %q, want 16 hex digits: %s", line.Client, raw)
		}
		for _, addr := range []string{"192.0.2", "198.51.100", "2001:db8", "10.0.0"} {
			if strings.Contains(raw, addr) {
				t.Errorf("the log line holds the client's address %s: %s", addr, raw)
			}
		}
		return line.Client
	}
	a := name(l, "192.0.2.1:1000", nil)
	if got := name(l, "192.0.2.1:2000", nil); got != a {
		t.Errorf("one client, another port: named %s then %s", a, got)
	}
	clock.Advance(24*time.Hour - time.Second) // 23:59:59 the same day
	if got := name(l, "192.0.2.1:1000", nil); got != a {
		t.Errorf("one client, later the same day: named %s then %s", a, got)
	}
	b := name(l, "192.0.2.2:1000", nil)
	if b == a {
		t.Errorf("two clients share the name %s", a)
	}
	// The clients the rate limit counts: an IPv6 /64, the client behind a
	// trusted proxy.
	v6 := name(l, "[2001:db8::1]:1000", nil)
	if got := name(l, "[2001:db8::2]:1000", nil); got != v6 {
		t.Errorf("one IPv6 /64: named %s then %s", v6, got)
	}
	behind := name(l, "10.0.0.5:1000", map[string]string{"X-Forwarded-For": "198.51.100.7"})
	if got := name(l, "10.0.0.6:1000", map[string]string{"X-Forwarded-For": "198.51.100.7"}); got != behind {
		t.Errorf("one client through two trusted proxies: named %s then %s", behind, got)
	}
	if got := name(l, "10.0.0.5:1000", map[string]string{"X-Forwarded-For": "198.51.100.8"}); got == behind {
		t.Errorf("two clients behind one proxy share the name %s", got)
	}
	// Another instance has its own key, even on the same day.
	if got := name(newRequestLog(deps), "192.0.2.1:1000", nil); got == a {
		t.Errorf("two instances name one client %s alike", a)
	}
	// At midnight UTC the key changes, and the names with it.
	clock.Advance(time.Second)
	next := name(l, "192.0.2.1:1000", nil)
	if next == a {
		t.Errorf("one client named %s on two days", a)
	}
	if got := name(l, "192.0.2.1:1000", nil); got != next {
		t.Errorf("one client, the next day: named %s then %s", next, got)
	}
	if got := name(l, "192.0.2.2:1000", nil); got == b || got == next {
		t.Errorf("the second client the next day: named %s, its name of the day before %s, the first client's %s", got, b, next)
	}
}
