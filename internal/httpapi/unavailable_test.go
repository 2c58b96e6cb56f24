package httpapi_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/user"
)

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

// TestPostgresGoneIsUnavailable: when PostgreSQL goes away under a running
// service (its connections break, new ones are refused), commands answer
// 503 with Retry-After and /readyz says not ready.
func TestPostgresGoneIsUnavailable(t *testing.T) {
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

// TestSQLiteBusyIsUnavailable: while another process holds SQLite's write
// lock for longer than the busy timeout, a command answers 503 with
// Retry-After and changes nothing; once the lock is free it works again.
func TestSQLiteBusyIsUnavailable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "test.db")
	db := sqlitetest.NewAt(t, path, sqlite.WithBusyTimeout(50*time.Millisecond))
	clock := testclock.New(start)
	keys := keyringtest.New(t, sqlite.DataKeys{})
	e := serveService(t, clock, user.Deps{
		Runner: db.Runner(clock.Now),
		Events: db.Events(),
		Outbox: db.Outbox(),
		Views:  sqlite.UserViews{Keys: keys},
		Keys:   keys,
	}, db.Ping, options{}, nil)

	release := sqlitetest.HoldWriteLock(t, path)
	wantUnavailable(t, "POST /v1/sign-in-links while another process writes", e.post(t, "/v1/sign-in-links", "", emailBody("ada@example.com")))
	release()
	wantStatus(t, "POST /v1/sign-in-links once the lock is free", e.post(t, "/v1/sign-in-links", "", emailBody("ada@example.com")), http.StatusAccepted)
}
