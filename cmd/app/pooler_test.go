package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgbouncertest"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

// TestBehindPgBouncer runs the app behind a PgBouncer of its own, in
// session and transaction mode.
func TestBehindPgBouncer(t *testing.T) {
	t.Parallel()
	t.Run("SecondInstance", testSecondInstanceBehindPgBouncer)
	t.Run("BenchmarksRefuseAPoolerThatDropsTheirSchema", testBenchmarksRefuseAPoolerThatDropsTheirSchema)
	t.Run("Pages", testPagesBehindPgBouncer)
}

// testSecondInstanceBehindPgBouncer starts an API-only instance while a
// full one runs, both behind one PgBouncer, and has the first relay
// deliver what the second accepts. With OUTBOX_INTERVAL at an hour only a
// wake-up across the processes can deliver in time: through the pooler in
// session mode, through DATABASE_LISTEN_URL in transaction mode. Without
// it, in transaction mode, the relay says at start and in its gauge that
// it polls, and delivers at its poll.
func testSecondInstanceBehindPgBouncer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		mode   postgres.Pooler
		listen bool
	}{
		{"session", postgres.PoolerSession, false},
		{"transaction with DATABASE_LISTEN_URL", postgres.PoolerTransaction, true},
		{"transaction polling", postgres.PoolerTransaction, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			direct := pgtest.NewURL(t)
			bouncer := pgbouncertest.Start(t, c.mode, pgtest.URL())
			mx := smtptest.NewServer(t)
			vars := func(more map[string]string) map[string]string {
				v := map[string]string{
					"DATABASE_URL":    bouncer.URL(t, direct),
					"DATABASE_POOLER": string(c.mode),
					"DATA_KEY":        testDataKey,
					"HTTP_ADDR":       "127.0.0.1:0",
					"SMTP_URL":        mx.URL(),
					"BASE_URL":        "http://accounts.test",
					"OUTBOX_INTERVAL": "1h",
				}
				if c.listen {
					v["DATABASE_LISTEN_URL"] = direct
				}
				for k, x := range more {
					v[k] = x
				}
				return v
			}
			polls := c.mode == postgres.PoolerTransaction && !c.listen
			first := map[string]string{}
			if polls {
				first["OUTBOX_INTERVAL"] = "200ms"
			}
			a := e2eStart(t, vars(first))
			b := e2eStart(t, vars(map[string]string{"RELAY": "false", "PROJECTIONS": "false"}))

			b.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"ada@example.com"}`, http.StatusAccepted, nil)
			e2eCheckMail(t, mx.Wait(t, 1, e2eWait)[0], "ada@example.com", "Your sign-in link")

			warned := strings.Contains(a.logs.String(), "without DATABASE_LISTEN_URL")
			if warned != polls {
				t.Errorf("the relay warned that it polls: %v, want %v", warned, polls)
			}
			want := "1"
			if polls {
				want = "0"
			}
			if got := a.gauge(t, "outbox_wakeups_listening"); got != want {
				t.Errorf("outbox_wakeups_listening = %s, want %s", got, want)
			}
			b.stop(t)
			a.stop(t)
		})
	}
}

// TestReadyzFailsWhileTheRelayCannotClaim: while the relay's claims fail
// and the database still answers, /readyz answers 503; once claims work
// again, 200, within seconds, though the relay polls once an hour: a
// failed claim is tried again on a backoff of its own.
func TestReadyzFailsWhileTheRelayCannotClaim(t *testing.T) {
	t.Parallel()
	direct := pgtest.NewURL(t)
	app := e2eStart(t, map[string]string{
		"DATABASE_URL":    direct,
		"DATA_KEY":        testDataKey,
		"HTTP_ADDR":       "127.0.0.1:0",
		"SMTP_URL":        smtptest.NewServer(t).URL(),
		"OUTBOX_INTERVAL": "1h",
	})
	app.awaitReady(t, http.StatusOK)
	conn, err := pgx.Connect(t.Context(), direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `ALTER TABLE outbox_messages RENAME TO outbox_messages_away`); err != nil {
		t.Fatal(err)
	}
	// Only a wake-up makes the relay claim before its poll: the
	// notification a commit of messages sends, sent until a claim fails
	// (the relay may not be listening yet).
	deadline := time.After(e2eWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for app.readyz(t) != http.StatusServiceUnavailable {
		if _, err := conn.Exec(t.Context(), `SELECT pg_notify('outbox_messages.' || current_schema(), 'test')`); err != nil {
			t.Fatal(err)
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("/readyz did not answer 503 within %s of the outbox going away", e2eWait)
		}
	}
	if _, err := conn.Exec(t.Context(), `ALTER TABLE outbox_messages_away RENAME TO outbox_messages`); err != nil {
		t.Fatal(err)
	}
	app.awaitReady(t, http.StatusOK)
	app.stop(t)
}

// readyz returns the status /readyz answers.
func (a *e2eApp) readyz(t *testing.T) int {
	t.Helper()
	resp, err := a.client.Get(a.base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// awaitReady waits until /readyz answers status.
func (a *e2eApp) awaitReady(t *testing.T, status int) {
	t.Helper()
	deadline := time.After(e2eWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := 0
	for {
		resp, err := a.client.Get(a.base + "/readyz")
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if last = resp.StatusCode; last == status {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("/readyz answered %d for %s, want %d", last, e2eWait, status)
		}
	}
}

// gauge returns the value /metrics shows for the gauge name, which has no
// labels.
func (a *e2eApp) gauge(t *testing.T, name string) string {
	t.Helper()
	resp, err := a.client.Get(a.base + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatalf("/metrics shows no %s:\n%s", name, raw)
	}
	return m[1]
}

// testBenchmarksRefuseAPoolerThatDropsTheirSchema: through a PgBouncer told
// to drop the startup parameters it cannot pass on, and with
// DATABASE_POOLER unset, a benchmark's schema would not reach the server
// and its messages would land in the database's own schema, for the app's
// relay to send. The benchmark refuses, and writes nothing; told of the
// pooler, it runs in each mode.
func testBenchmarksRefuseAPoolerThatDropsTheirSchema(t *testing.T) {
	t.Parallel()
	for _, mode := range []postgres.Pooler{postgres.PoolerSession, postgres.PoolerTransaction} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			bouncer := pgbouncertest.Start(t, mode, pgtest.URL(),
				pgbouncertest.Ignore("search_path", "enable_sort", "enable_bitmapscan", "synchronous_commit"))
			env := map[string]string{"DATABASE_URL": bouncer.URL(t, pgtest.URL())}
			if mode == postgres.PoolerSession {
				// In transaction mode pgx's prepared statements fail first.
				_, err := runApp(t, t.Context(), env, "bench", "drain", "--messages", "10")
				if err == nil || !strings.Contains(err.Error(), "search_path") {
					t.Errorf("bench drain through a pooler that drops search_path: %v, want a refusal that names it", err)
				}
			}
			env["DATABASE_POOLER"] = string(mode)
			if out, err := runApp(t, t.Context(), env, "bench", "drain", "--messages", "10"); err != nil || !strings.Contains(out, "drain: 10 messages") {
				t.Errorf("bench drain with DATABASE_POOLER=%s: %v\n%s", mode, err, out)
			}
			conn, err := pgx.Connect(t.Context(), pgtest.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			var tables int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil {
				t.Fatal(err)
			}
			if tables != 0 {
				t.Errorf("%d tables in the database's own schema after the benchmarks, want none", tables)
			}
		})
	}
}

// testPagesBehindPgBouncer walks the browser pages behind PgBouncer in
// each mode: ask for a link on the home page, sign in with its code, and
// see the account page, whose activity the projection wrote.
func testPagesBehindPgBouncer(t *testing.T) {
	t.Parallel()
	for _, mode := range []postgres.Pooler{postgres.PoolerSession, postgres.PoolerTransaction} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			database := e2eBehindPgBouncer(mode)(t)
			mx := smtptest.NewServer(t)
			app := e2eStart(t, database.env(map[string]string{
				"DATA_KEY":        testDataKey,
				"HTTP_ADDR":       "127.0.0.1:0",
				"SMTP_URL":        mx.URL(),
				"BASE_URL":        "http://accounts.test",
				"OUTBOX_INTERVAL": "1h",
			}))
			client := &http.Client{Timeout: e2eWait, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			post := func(path string, form url.Values) *http.Response {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, app.base+path, strings.NewReader(form.Encode()))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Sec-Fetch-Site", "same-origin")
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp
			}
			if resp := post("/", url.Values{"email": {"ada@example.com"}}); resp.StatusCode != http.StatusOK {
				t.Fatalf("POST / answered %s, want 200", resp.Status)
			}
			code := e2eLinkCode(t, mx.Wait(t, 1, e2eWait)[0], "http://accounts.test/sign-in?code=")
			resp := post("/sign-in", url.Values{"code": {code}})
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account" || len(resp.Cookies()) == 0 {
				t.Fatalf("POST /sign-in answered %s to %q with %d cookies, want 303 to /account with the session", resp.Status, resp.Header.Get("Location"), len(resp.Cookies()))
			}
			deadline := time.Now().Add(e2eWait)
			for {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, app.base+"/account", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.AddCookie(resp.Cookies()[0])
				got, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(got.Body)
				got.Body.Close()
				// The page offers line breaks inside the address (<wbr>).
				if got.StatusCode != http.StatusOK || !strings.Contains(strings.ReplaceAll(string(body), "<wbr>", ""), "ada@example.com") {
					t.Fatalf("GET /account answered %s without the address:\n%s", got.Status, body)
				}
				// The activity is listed once the projection has it.
				if strings.Contains(string(body), `<ul class="activity">`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the account page showed no sign-in within %s:\n%s", e2eWait, body)
				}
				time.Sleep(50 * time.Millisecond)
			}
			app.stop(t)
		})
	}
}
