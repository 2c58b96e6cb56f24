package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/user"
)

// TestFailedCommands holds what the API answers when a command fails
// without the client being at fault: 503 with Retry-After when it may be
// sent again, a 500 that shows nothing of its cause otherwise.
func TestFailedCommands(t *testing.T) {
	t.Parallel()
	t.Run("contention is busy, not internal", testContentionIsBusyNotInternal)
	t.Run("an unexpected error shows nothing", testUnexpectedErrors)
	t.Run("PostgreSQL gone is unavailable", testPostgresGoneIsUnavailable)
	t.Run("SQLite busy is unavailable", testSQLiteBusyIsUnavailable)
}

// testContentionIsBusyNotInternal: a command that lost its race too often
// changed nothing and may be sent again, which a 503 with Retry-After says.
func testContentionIsBusyNotInternal(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: contended{}})
	r := serve(t, h, "DELETE", "/v1/sessions/current", "", map[string]string{"Authorization": "Bearer " + fakeToken}, nil)
	wantProblem(t, "a contended sign-out", r, http.StatusServiceUnavailable, httpapi.TypeBusy)
	if wait := wantRetryAfter(t, "a contended sign-out", r); wait != time.Second {
		t.Errorf("Retry-After %s, want 1s", wait)
	}
}

// testUnexpectedErrors: a panic or an unknown error is a 500 problem that
// shows nothing of its cause.
func testUnexpectedErrors(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: panicky{}})
	auth := map[string]string{"Authorization": "Bearer " + fakeToken}
	for _, c := range []struct{ method, path string }{{"GET", "/v1/me"}, {"DELETE", "/v1/sessions/current"}} {
		r := serve(t, h, c.method, c.path, "", auth, nil)
		p := wantProblem(t, c.method+" "+c.path, r, http.StatusInternalServerError, httpapi.TypeInternal)
		if strings.Contains(string(r.body), "boom") || strings.Contains(string(r.body), "hunter2") || p.Detail != "" {
			t.Errorf("%s %s: the 500 shows its cause: %s", c.method, c.path, r.body)
		}
	}
}

// testPostgresGoneIsUnavailable: when PostgreSQL goes away under a running
// service (its connections break, new ones are refused), commands answer
// 503 with Retry-After and /readyz says not ready.
func testPostgresGoneIsUnavailable(t *testing.T) {
	t.Parallel()
	db, cut := pgtest.NewCut(t)
	e := servePostgres(t, db, options{})
	wantStatus(t, "POST /v1/sign-in-links before the outage", e.post(t, "/v1/sign-in-links", "", emailBody("ada@example.com")), http.StatusAccepted)
	wantStatus(t, "GET /readyz before the outage", e.get(t, "/readyz", ""), http.StatusOK)

	cut()
	// The first command finds a pooled connection broken, the next ones find
	// connections refused.
	for range 3 {
		r := e.post(t, "/v1/sign-in-links", "", emailBody("ada@example.com"))
		wantUnavailable(t, "POST /v1/sign-in-links while the database is gone", r)
	}
	wantUnavailable(t, "GET /v1/me while the database is gone", e.get(t, "/v1/me", "some-token"))
	wantProblem(t, "GET /readyz while the database is gone", e.get(t, "/readyz", ""), http.StatusServiceUnavailable, httpapi.TypeNotReady)
}

// testSQLiteBusyIsUnavailable: while another process holds SQLite's write
// lock for longer than the busy timeout, a command answers 503 with
// Retry-After and changes nothing; once the lock is free it works again.
func testSQLiteBusyIsUnavailable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "test.db")
	db := sqlitetest.NewAt(t, path, sqlite.WithBusyTimeout(50*time.Millisecond))
	clock := testclock.New(start)
	keys := keyringtest.New(t, sqlite.DataKeys{})
	e := serveService(t, clock, user.Deps{
		Runner: db.Runner(clock.Now),
		Events: db.Events(),
		Outbox: db.Outbox(),
		Views:  sqlite.UserViews{},
		Keys:   keys,
	}, db.Ping, options{}, nil)

	release := sqlitetest.HoldWriteLock(t, path)
	wantUnavailable(t, "POST /v1/sign-in-links while another process writes", e.post(t, "/v1/sign-in-links", "", emailBody("ada@example.com")))
	release()
	wantStatus(t, "POST /v1/sign-in-links once the lock is free", e.post(t, "/v1/sign-in-links", "", emailBody("ada@example.com")), http.StatusAccepted)
}

// contended is a domain whose commands keep losing their races.
type contended struct{ fakeUsers }

func (contended) SignOut(context.Context, string) error {
	return fmt.Errorf("user: gave up after 8 concurrent changes: %w", eventstore.ErrConcurrency)
}

func (c contended) DeleteAccount(ctx context.Context, token string) error {
	return c.SignOut(ctx, token)
}

// panicky is a domain that panics or fails in ways the API does not know.
type panicky struct{ fakeUsers }

func (panicky) Me(context.Context, string) (user.User, error) { panic("boom") }

func (p panicky) DeleteAccount(ctx context.Context, token string) error { return p.SignOut(ctx, token) }

func (panicky) SignOut(context.Context, string) error {
	return errors.New("connection refused to 10.0.0.7:5432 password=hunter2")
}

// wantUnavailable checks the answer to a command made while the database
// could not be reached or was busy: 503 /problems/unavailable with a
// Retry-After of a few seconds, never a 500.
func wantUnavailable(t *testing.T, what string, r response) {
	t.Helper()
	wantProblem(t, what, r, http.StatusServiceUnavailable, httpapi.TypeUnavailable)
	if wait := wantRetryAfter(t, what, r); wait > 30*time.Second {
		t.Errorf("%s: Retry-After %s, want a few seconds", what, wait)
	}
}
