package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/logctx"
	"github.com/eventsourced/accounts/internal/requestid"
)

// TestRequestIDs holds X-Request-Id to what docs/api.md promises: a valid
// one is kept, any other replaced, a missing one made; every answer carries
// it, each problem names it, the domain's context holds it, and the
// request's log lines carry it.
func TestRequestIDs(t *testing.T) {
	t.Parallel()
	t.Run("echoed", testRequestIDEchoed)
	t.Run("in every problem", testRequestIDInProblems)
	t.Run("in the domain's context and the log lines", testRequestIDInContextAndLog)
}

func testRequestIDEchoed(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}})
	for _, id := range []string{"a", "0f8fad5b-d9cb-469f-a165-70867728950e", "01HV6Y:web.1/a+b=", strings.Repeat("x", requestid.MaxLen)} {
		r := serve(t, h, "GET", "/healthz", "", map[string]string{requestid.Header: id}, nil)
		if got := r.header.Get(requestid.Header); got != id {
			t.Errorf("sent valid %q, got back %q", id, got)
		}
	}
	seen := map[string]bool{}
	for _, id := range []string{"", "has space", "ann@example.com", strings.Repeat("x", requestid.MaxLen+1), "é"} {
		header := map[string]string{}
		if id != "" {
			header[requestid.Header] = id
		}
		r := serve(t, h, "GET", "/healthz", "", header, nil)
		got := r.header.Get(requestid.Header)
		if got == id || !requestid.Valid(got) || seen[got] {
			t.Errorf("sent %q, got back %q: want a new valid ID", id, got)
		}
		seen[got] = true
	}
}

func testRequestIDInProblems(t *testing.T) {
	t.Parallel()
	notReady := func(context.Context) error { return errors.New("down") }
	limited := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, RateLimit: 1})
	serve(t, limited, "GET", "/v1/me", "192.0.2.9:1000", nil, nil) // spends the one request a minute
	for _, c := range []struct {
		name   string
		h      http.Handler
		method string
		path   string
		auth   bool
		status int
		typ    string
	}{
		{"404", httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}}), "GET", "/v1/nothing", false, http.StatusNotFound, httpapi.TypeNotFound},
		{"405", httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}}), "PUT", "/v1/me", false, http.StatusMethodNotAllowed, httpapi.TypeMethodNotAllowed},
		{"401", httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}}), "GET", "/v1/me", false, http.StatusUnauthorized, httpapi.TypeUnauthenticated},
		{"429", limited, "GET", "/v1/me", false, http.StatusTooManyRequests, httpapi.TypeTooManyRequests},
		{"panic", httpapi.NewServer(httpapi.Deps{Users: panicky{}}), "GET", "/v1/me", true, http.StatusInternalServerError, httpapi.TypeInternal},
		{"503", httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, Ready: notReady}), "GET", "/readyz", false, http.StatusServiceUnavailable, httpapi.TypeNotReady},
	} {
		t.Run(c.name, func(t *testing.T) {
			header := map[string]string{requestid.Header: "req-" + c.name}
			if c.auth {
				header["Authorization"] = "Bearer " + fakeToken
			}
			r := serve(t, c.h, c.method, c.path, "192.0.2.9:1000", header, nil)
			p := wantProblem(t, c.method+" "+c.path, r, c.status, c.typ)
			if p.RequestID != "req-"+c.name {
				t.Errorf("problem request_id %q, want %q (%s)", p.RequestID, "req-"+c.name, r)
			}
		})
	}
}

// seenIDs is a domain that remembers the request ID of each sign-in link
// asked for, as a unit of work would read it.
type seenIDs struct {
	fakeUsers
	mu  sync.Mutex
	ids []string
}

func (s *seenIDs) RequestSignInLink(ctx context.Context, address string) error {
	s.mu.Lock()
	s.ids = append(s.ids, requestid.From(ctx))
	s.mu.Unlock()
	return s.fakeUsers.RequestSignInLink(ctx, address)
}

func testRequestIDInContextAndLog(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	users := &seenIDs{}
	h := httpapi.NewServer(httpapi.Deps{Users: users, Log: slog.New(logctx.New(slog.NewJSONHandler(&buf, nil)))})
	r := serve(t, h, "POST", "/v1/sign-in-links", "", map[string]string{requestid.Header: "req-log-1", "Content-Type": "application/json"}, []byte(emailBody("ada@example.com")))
	wantStatus(t, "POST /v1/sign-in-links", r, http.StatusAccepted)
	if len(users.ids) != 1 || users.ids[0] != "req-log-1" {
		t.Errorf("the domain's context held request IDs %q, want [req-log-1]", users.ids)
	}
	r = serve(t, httpapi.NewServer(httpapi.Deps{Users: panicky{}, Log: slog.New(logctx.New(slog.NewJSONHandler(&buf, nil)))}),
		"GET", "/v1/me", "", map[string]string{requestid.Header: "req-log-2", "Authorization": "Bearer " + fakeToken}, nil)
	wantStatus(t, "GET /v1/me of a panicking domain", r, http.StatusInternalServerError)

	want := map[string]string{"http POST /v1/sign-in-links": "req-log-1", "handler panicked": "req-log-2", "http GET /v1/me": "req-log-2"}
	got := map[string]string{}
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var line struct {
			Msg       string `json:"msg"`
			Method    string `json:"method"`
			Route     string `json:"route"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(l, &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		key := line.Msg
		if line.Msg == "http" {
			key += " " + line.Route
		}
		got[key] = line.RequestID
	}
	for k, id := range want {
		if got[k] != id {
			t.Errorf("log line %q has request_id %q, want %q\n%s", k, got[k], id, buf.Bytes())
		}
	}
}

// syncBuffer is a bytes.Buffer for a log that handlers write to at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}
