package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/user"
)

// runActivity keeps the activity projection of e's database until t ends,
// and returns a function that waits until it has applied every event.
func runActivity(t *testing.T, e *env) (caughtUp func()) {
	t.Helper()
	r, err := projections.NewRunner(e.log, []projections.Projection{e.activity})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := e.activity.Behind(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the activity projection is still %d events behind", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// serveSQLite serves the API over a user.Service on a fresh SQLite file,
// with its activity projection.
func serveSQLite(t *testing.T) *env {
	t.Helper()
	db := sqlitetest.New(t)
	clock := testclock.New(start)
	e := serveService(t, clock, user.Deps{
		Runner: db.Runner(clock.Now),
		Events: db.Events(),
		Outbox: db.Outbox(),
		Views:  sqlite.UserViews{},
	}, db.Ping, options{}, db.Activity())
	e.log, e.activity = db.Log(sqlite.LogConfig{PollInterval: 5 * time.Millisecond}), db.Activity()
	return e
}

type activityPage struct {
	Items []struct {
		Type   string    `json:"type"`
		At     time.Time `json:"at"`
		Detail string    `json:"detail"`
	} `json:"items"`
	Next   *string `json:"next"`
	Behind int64   `json:"behind"`
}

func (e *env) activityPage(t *testing.T, token, query string) activityPage {
	t.Helper()
	r := e.get(t, "/v1/me/activity"+query, token)
	wantStatus(t, "GET /v1/me/activity"+query, r, http.StatusOK)
	wantKeys(t, "GET /v1/me/activity", r.body, "items", "next", "behind")
	var p activityPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// An account's activity, newest first, page by page: its first sign-in
// (which created it), sign-out, second sign-in and email change; no other
// account's activity shows; bad parameters are 400 and change nothing.
func TestActivity(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) { t.Parallel(); testActivity(t, setup(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testActivity(t, serveSQLite(t)) })
}

func testActivity(t *testing.T, e *env) {
	caughtUp := runActivity(t, e)
	ada := e.signIn(t, "ada@example.com")
	e.clock.Advance(time.Minute)
	if r := e.send(t, request{method: "DELETE", path: "/v1/sessions/current", token: ada.Token}); r.status != http.StatusNoContent {
		t.Fatalf("sign out: %s", r)
	}
	e.clock.Advance(time.Minute)
	ada = e.signIn(t, "ada@example.com")
	grace := e.signIn(t, "grace@example.com")
	e.clock.Advance(time.Minute)
	wantStatus(t, "email change", e.post(t, "/v1/me/email-change", ada.Token, newEmailBody("ada@lovelace.example")), http.StatusAccepted)
	caughtUp()

	want := []struct{ typ, detail string }{
		{"email_change_requested", "ada@lovelace.example"},
		{"signed_in", ""},
		{"signed_out", ""},
		{"signed_in", ""},
		{"registered", ""},
	}
	var got []struct{ typ, detail string }
	query := "?limit=2"
	for pages := 0; ; pages++ {
		p := e.activityPage(t, ada.Token, query)
		if p.Behind != 0 {
			t.Errorf("behind = %d once caught up", p.Behind)
		}
		for _, it := range p.Items {
			got = append(got, struct{ typ, detail string }{it.Type, it.Detail})
		}
		if p.Next == nil {
			break
		}
		if pages > 5 {
			t.Fatal("pages never end")
		}
		query = "?limit=2&before=" + url.QueryEscape(*p.Next)
	}
	if len(got) != len(want) {
		t.Fatalf("activity %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("activity[%d] = %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
	if p := e.activityPage(t, grace.Token, ""); len(p.Items) != 2 || p.Items[0].Type != "signed_in" || p.Items[1].Type != "registered" {
		t.Errorf("grace's activity %+v, want her sign-in and registration only", p.Items)
	}

	for _, bad := range []string{"?limit=0", "?limit=101", "?limit=x", "?limit=1&limit=2", "?limit=+5", "?before=nope", "?before=1.2.3", "?before=-1.0", "?page=2"} {
		wantProblem(t, "GET /v1/me/activity"+bad, e.get(t, "/v1/me/activity"+bad, ada.Token), http.StatusBadRequest, "/problems/bad-request")
	}
	wantUnauthenticated(t, "GET /v1/me/activity without a token", e.get(t, "/v1/me/activity", ""))
}
