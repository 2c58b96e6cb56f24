package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// runActivity keeps the activity projection of e's database until t ends,
// and returns a function that waits until it has applied every event.
func runActivity(t *testing.T, e *env) (caughtUp func()) {
	t.Helper()
	r, err := async.NewRunner(e.log, []projections.Projection{e.activity}, async.WithFollowInterval(10*time.Millisecond))
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
	keys := keyringtest.New(t, sqlite.DataKeys{})
	e := serveService(t, clock, user.Deps{
		Runner: db.Runner(clock.Now),
		Events: db.Events(),
		Outbox: db.Outbox(),
		Views:  sqlite.UserViews{},
		Keys:   keys,
	}, db.Ping, options{}, user.ActivityProjection{Store: db.ActivityStore(), Log: db.Log(sqlite.LogConfig{}), Keys: keys})
	e.log, e.activity = db.Log(sqlite.LogConfig{PollInterval: 5 * time.Millisecond}), user.ActivityProjection{Store: db.ActivityStore(), Log: db.Log(sqlite.LogConfig{}), Keys: keys}
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
		{"email_change_requested", ""}, // The address asked for may be another's.
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

	for _, bad := range []string{"?limit=0", "?limit=101", "?limit=x", "?limit=1&limit=2", "?limit=+5", "?before=nope", "?before=1.2.3", "?before=-1.0", "?page=2",
		// Query strings that cannot be parsed, which Go would read as if
		// the bad pair were not there.
		"?before=%%%bad", "?limit=2&before=%zz", "?limit=%32%", "?limit=2;x", "?%"} {
		wantProblem(t, "GET /v1/me/activity"+bad, e.get(t, "/v1/me/activity"+bad, ada.Token), http.StatusBadRequest, "/problems/bad-request")
	}
	wantUnauthenticated(t, "GET /v1/me/activity without a token", e.get(t, "/v1/me/activity", ""))
}

// An account's activity shows each session ended by another of its
// sessions, one by one or everywhere else, and by a change of address and
// its undoing, each with why, besides the change and its undoing with the
// address each made, on both backends.
func TestActivityOfEndedSessionsAndUndoneChanges(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) { t.Parallel(); testActivityOfEndedSessions(t, setup(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testActivityOfEndedSessions(t, serveSQLite(t)) })
}

func testActivityOfEndedSessions(t *testing.T, e *env) {
	caughtUp := runActivity(t, e)
	laptop := e.signInAs(t, "ada@example.com", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0")
	e.signInAs(t, "ada@example.com", "curl/8.5.0")
	for _, s := range e.sessions(t, laptop.Token).Sessions {
		if !s.Current {
			wantStatus(t, "DELETE /v1/me/sessions/{id}", e.send(t, request{method: "DELETE", path: "/v1/me/sessions/" + s.ID.String(), token: laptop.Token}), http.StatusNoContent)
		}
	}
	e.signIn(t, "ada@example.com")
	wantStatus(t, "DELETE /v1/me/sessions", e.send(t, request{method: "DELETE", path: "/v1/me/sessions", token: laptop.Token}), http.StatusOK)
	e.signIn(t, "ada@example.com")
	wantStatus(t, "email change", e.post(t, "/v1/me/email-change", laptop.Token, newEmailBody("ada@example.net")), http.StatusAccepted)
	code := e.oneMail(t, mail.TopicEmailChange, "ada@example.net", "/confirm-email")
	wantStatus(t, "confirm", e.post(t, "/v1/email-changes", laptop.Token, codeBody(code)), http.StatusOK)
	undo := e.oneMail(t, mail.TopicEmailChanged, "ada@example.com", "/undo-email")
	wantStatus(t, "undo", e.post(t, "/v1/email-changes/undo", "", codeBody(undo)), http.StatusOK)
	ada := e.signIn(t, "ada@example.com")
	caughtUp()

	var got []string
	for _, it := range e.activityPage(t, ada.Token, "?limit=100").Items {
		got = append(got, strings.TrimSpace(it.Type+" "+it.Detail))
	}
	want := []string{
		"signed_in",
		"session_ended " + user.EndedByUndo,
		"email_change_undone ada@example.com",
		"session_ended " + user.EndedByEmailChange,
		"email_changed ada@example.net",
		"email_change_requested",
		"signed_in",
		"session_ended " + user.EndedByOwner,
		"signed_in",
		"session_ended " + user.EndedByOwner,
		"signed_in",
		"signed_in",
		"registered",
	}
	if !slices.Equal(got, want) {
		t.Errorf("activity, newest first:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An account's activity, after random commands of several people, is what
// a replay of the whole log makes of it, item for item, on both backends.
func TestActivityEqualsAReplayOfTheLog(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) { t.Parallel(); testActivityReplay(t, setup(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testActivityReplay(t, serveSQLite(t)) })
}

func testActivityReplay(t *testing.T, e *env) {
	caughtUp := runActivity(t, e)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	people := []string{"ada@example.com", "grace@example.com", "alan@example.com", "edsger@example.com"}
	tokens := map[string]string{}
	ids := map[string]string{}
	for i := range 40 {
		// Ten minutes on average between commands keeps every address and
		// account well within its limit of links.
		e.clock.Advance(time.Duration(300+rng.IntN(600)) * time.Second)
		who := people[rng.IntN(len(people))]
		token, signedIn := tokens[who]
		switch op := rng.IntN(4); {
		case op <= 1 || !signedIn:
			s := e.signIn(t, who)
			tokens[who], ids[who] = s.Token, s.User.ID.String()
		case op == 2:
			wantStatus(t, "sign out", e.send(t, request{method: "DELETE", path: "/v1/sessions/current", token: token}), http.StatusNoContent)
			delete(tokens, who)
		default:
			to := fmt.Sprintf("new-%d@example.com", i)
			wantStatus(t, "email change", e.post(t, "/v1/me/email-change", token, newEmailBody(to)), http.StatusAccepted)
			e.mails(t) // The confirmation, never used.
		}
	}
	caughtUp()

	assertActivityIsTheReplay(t, e, caughtUp, tokens, ids)
}

// assertActivityIsTheReplay checks that each account's activity, page by
// page, is what a replay of the whole log makes of it. tokens holds the
// people signed in, ids every person's account; one not signed in signs in
// to read, which the replay counts.
func assertActivityIsTheReplay(t *testing.T, e *env, caughtUp func(), tokens, ids map[string]string) {
	t.Helper()
	// The replay: every event of the log, in its order, through ActivityOf.
	want := map[string][]string{}
	err := e.runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var after eventstore.Position
		for {
			page, err := e.events.ReadAll(ctx, tx, after, 500)
			if err != nil || len(page) == 0 {
				return err
			}
			for _, ev := range page {
				id, a, ok, err := user.ActivityOf(ctx, tx, e.keys, ev)
				if err != nil {
					return err
				}
				if ok {
					want[id.String()] = append([]string{a.Type + " " + a.Detail + " " + a.At.UTC().Format(time.RFC3339Nano)}, want[id.String()]...)
				}
			}
			after = page[len(page)-1].Position
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for who, id := range ids {
		token, ok := tokens[who]
		if !ok {
			token = e.signIn(t, who).Token
			caughtUp()
			want[id] = append([]string{"signed_in  " + e.clock.Now().UTC().Format(time.RFC3339Nano)}, want[id]...)
		}
		var got []string
		query := "?limit=7"
		for {
			p := e.activityPage(t, token, query)
			for _, it := range p.Items {
				got = append(got, it.Type+" "+it.Detail+" "+it.At.UTC().Format(time.RFC3339Nano))
			}
			if p.Next == nil {
				break
			}
			query = "?limit=7&before=" + url.QueryEscape(*p.Next)
		}
		if !slices.Equal(got, want[id]) {
			t.Errorf("%s's activity:\n%s\nwant the replay's:\n%s", who, strings.Join(got, "\n"), strings.Join(want[id], "\n"))
		}
	}
}

// A blue/green rebuild of the activity while people sign in and out and
// read their activity: no read fails, reads switch to the new version, the
// old one's table is gone, and the new version is what a replay of the log
// makes, item for item. Twice, from version 1 to 2 and from 2 to 3.
func TestActivityRebuildsBlueGreenWhileServing(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) { t.Parallel(); testActivityRebuild(t, setup(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testActivityRebuild(t, serveSQLite(t)) })
}

func testActivityRebuild(t *testing.T, e *env) {
	caughtUp := runActivity(t, e)
	people := []string{"ada@example.com", "grace@example.com", "alan@example.com"}
	tokens, ids := map[string]string{}, map[string]string{}
	for _, who := range people {
		s := e.signIn(t, who)
		tokens[who], ids[who] = s.Token, s.User.ID.String()
	}
	caughtUp()
	rb, ok := e.activity.(projections.Rebuildable)
	if !ok {
		t.Fatalf("%T is not rebuildable", e.activity)
	}
	for _, want := range []struct{ from, to int }{{1, 2}, {2, 3}} {
		ctx, cancel := context.WithCancel(t.Context())
		// Readers: every read answers 200, before, during and after the
		// switch.
		var reads atomic.Int64
		failed := make(chan string, 100)
		var wg sync.WaitGroup
		for who, token := range tokens {
			if who == "ada@example.com" {
				continue // She signs out and in meanwhile.
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/me/activity?limit=5", nil)
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := e.client.Do(req)
					if ctx.Err() != nil {
						return
					}
					if err != nil {
						failed <- err.Error()
						return
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						failed <- fmt.Sprintf("%d %s", resp.StatusCode, body)
						return
					}
					reads.Add(1)
				}
			}()
		}
		// A writer: Ada signs out and in again, ten minutes apart, so the
		// log grows while both versions follow it.
		wrote := make(chan int)
		go func() {
			n := 0
			defer func() { wrote <- n }()
			for ctx.Err() == nil {
				e.clock.Advance(10 * time.Minute)
				r := e.send(t, request{method: "DELETE", path: "/v1/sessions/current", token: tokens["ada@example.com"]})
				if r.status != http.StatusNoContent {
					t.Errorf("sign out: %s", r)
					return
				}
				e.clock.Advance(10 * time.Minute)
				s := e.signIn(t, "ada@example.com")
				tokens["ada@example.com"] = s.Token
				n++
			}
		}()
		var progressed []async.Progress
		var registered []projections.Versions
		from, to, err := async.Renew(t.Context(), e.log, rb, func(p async.Progress) {
			progressed = append(progressed, p)
			v, err := e.log.Versions(t.Context(), rb.Name(), 1)
			if err != nil {
				t.Error(err)
			}
			registered = append(registered, v)
		}, async.WithFollowInterval(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		// Reads go on a while on the new version.
		after := reads.Load()
		for reads.Load() < after+20 && len(failed) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
		wg.Wait()
		cycles := <-wrote
		close(failed)
		for f := range failed {
			t.Errorf("a read during the rebuild to version %d failed: %s", want.to, f)
		}
		if from != want.from || to != want.to {
			t.Fatalf("Renew went from version %d to %d, want %d to %d", from, to, want.from, want.to)
		}
		if len(progressed) == 0 || progressed[len(progressed)-1].Done != progressed[len(progressed)-1].Total {
			t.Errorf("progress %+v, want reports ending caught up", progressed)
		}
		for _, v := range registered {
			if v != (projections.Versions{Serving: want.from, Building: want.to}) {
				t.Errorf("while building, the registry held %+v, want version %d serving and %d building", v, want.from, want.to)
				break
			}
		}
		for _, v := range registered {
			if v != (projections.Versions{Serving: want.from, Building: want.to}) {
				t.Errorf("while building, the registry held %+v, want version %d serving and %d building", v, want.from, want.to)
				break
			}
		}
		v, err := e.log.Versions(t.Context(), rb.Name(), 1)
		if err != nil || v != (projections.Versions{Serving: want.to}) {
			t.Fatalf("registry %+v, %v; want version %d serving and none building", v, err, want.to)
		}
		err = e.log.Catalog(t.Context(), rb.Name(), 1, func(ctx context.Context, tx uow.Tx, v projections.Versions) (projections.Versions, error) {
			return v, rb.At(want.from).Reset(ctx, tx)
		})
		if err == nil {
			t.Errorf("version %d's table is still there after the switch", want.from)
		}
		if n, _, err := e.log.Behind(t.Context(), projections.Group(rb.At(want.from)), rb.Types()); err != nil || n != 0 {
			t.Errorf("the retired version %d counts %d events behind (%v), want none", want.from, n, err)
		}
		t.Logf("version %d: %d reads, %d sign-out and sign-in cycles during the rebuild", want.to, reads.Load(), cycles)
		caughtUp()
		assertActivityIsTheReplay(t, e, caughtUp, tokens, ids)
	}
}

// DELETE /v1/me: 204, every session of the account stops working, and its
// activity goes too, once the projection has read the erasure, while
// another account's stays; the address signs up again as a new account,
// whose activity starts anew. Without a token, or with one that no longer
// works, it is 401 and changes nothing.
func TestDeleteMe(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) { t.Parallel(); testDeleteMe(t, setup(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testDeleteMe(t, serveSQLite(t)) })
}

func testDeleteMe(t *testing.T, e *env) {
	caughtUp := runActivity(t, e)
	ada := e.signIn(t, "ada@example.com")
	other := e.signIn(t, "ada@example.com")
	grace := e.signIn(t, "grace@example.com")
	wantStatus(t, "email change", e.post(t, "/v1/me/email-change", ada.Token, newEmailBody("ada@lovelace.example")), http.StatusAccepted)
	caughtUp()
	if items, _, err := e.activity.Page(t.Context(), ada.User.ID, nil, 10); err != nil || len(items) != 4 {
		t.Fatalf("Ada's activity before: %d items, %v; want 4", len(items), err)
	}

	wantUnauthenticated(t, "DELETE /v1/me without a token", e.send(t, request{method: "DELETE", path: "/v1/me"}))
	if r := e.send(t, request{method: "DELETE", path: "/v1/me", token: ada.Token}); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE /v1/me: %s, want 204 and no body", r)
	}
	for _, token := range []string{ada.Token, other.Token} {
		wantUnauthenticated(t, "GET /v1/me of the deleted account", e.get(t, "/v1/me", token))
		wantUnauthenticated(t, "DELETE /v1/me again", e.send(t, request{method: "DELETE", path: "/v1/me", token: token}))
	}
	caughtUp()
	if items, _, err := e.activity.Page(t.Context(), ada.User.ID, nil, 10); err != nil || len(items) != 0 {
		t.Errorf("the deleted account's activity: %v, %v; want none", items, err)
	}
	if p := e.activityPage(t, grace.Token, ""); len(p.Items) != 2 {
		t.Errorf("Grace's activity: %d items, want her 2", len(p.Items))
	}
	again := e.signIn(t, "ada@example.com")
	if again.User.ID == ada.User.ID {
		t.Fatal("the address signed in to the deleted account")
	}
	caughtUp()
	if p := e.activityPage(t, again.Token, ""); len(p.Items) != 2 || p.Items[1].Type != "registered" {
		t.Errorf("the new account's activity: %+v, want its registration and sign-in", p.Items)
	}
}
