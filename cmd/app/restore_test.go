package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/pgcluster"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

// A logical backup (pg_dump, pg_restore) of a running database restored
// into a new cluster, whose transaction ids run thousands below those of
// the restored events: the app started on the copy keeps every projection
// where it was, applies the new events, counts honestly what it has still
// to apply (status, the API's behind), and a rebuild finishes.
func TestLogicalRestoreIntoAnotherCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	target := pgcluster.New(t)
	sourceURL := pgtest.NewURL(t)
	u, err := url.Parse(sourceURL)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	libpqURL := pgtest.URL() // pg_dump knows no search_path parameter.

	// The source runs well ahead of the new cluster, as a server that has
	// run for a while does.
	next, err := pgcluster.NextTransactionID(ctx, target.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pgcluster.BurnTransactionIDs(ctx, libpqURL, next+3000); err != nil {
		t.Fatal(err)
	}

	mx := smtptest.NewServer(t)
	vars := func(databaseURL string, projections bool) map[string]string {
		return e2eDatabase{URL: databaseURL}.mailing(mx, map[string]string{
			"SWEEP_INTERVAL":  "0",
			"HTTP_RATE_LIMIT": "0",
			"PROJECTIONS":     fmt.Sprint(projections),
		})
	}
	mails := &e2eMails{mx: mx}
	signIn := func(a *e2eApp, email string) string {
		t.Helper()
		return a.signIn(t, mails, email).Token
	}
	status := func(databaseURL string) (string, error) {
		t.Helper()
		return runApp(t, ctx, map[string]string{"DATABASE_URL": databaseURL, "DATA_KEY": testDataKey}, "projections", "status")
	}
	caughtUp := statusTable("1", "0", `0\.0s`, "running")

	// On the source: two people sign in, Ada twice, and the activity
	// projection applies it all.
	src := e2eStart(t, vars(sourceURL, true))
	ada := signIn(src, "ada@example.com")
	signIn(src, "grace@example.com")
	ada = signIn(src, "ada@example.com")
	adaItems := awaitActivity(t, src, ada, func(p activityAnswer) bool { return len(p.Items) >= 3 && p.Behind == 0 })
	src.stop(t)
	if t.Failed() {
		t.FailNow()
	}
	if out, err := status(sourceURL); err != nil || !caughtUp.MatchString(out) {
		t.Fatalf("status on the source: %q, %v; want the projection caught up", out, err)
	}
	applied := appliedState(t, sourceURL)

	if err := target.RestoreSchema(ctx, libpqURL, schema, "postgres"); err != nil {
		t.Fatal(err)
	}
	targetURL := target.URL("postgres") + "&search_path=" + url.QueryEscape(schema)
	conn, err := pgx.Connect(ctx, targetURL)
	if err != nil {
		t.Fatal(err)
	}
	var lowest, next2 uint64
	if err := conn.QueryRow(ctx, `SELECT min(transaction_id)::text::bigint, pg_snapshot_xmax(pg_current_snapshot())::text::bigint FROM events`).Scan(&lowest, &next2); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if lowest < next2+2000 {
		t.Fatalf("the restored events start at transaction id %d, the new cluster hands out %d: the copy does not run ahead", lowest, next2)
	}

	// API and relay on the copy, no projection yet: the new events wait,
	// and the API and status say how many.
	dst := e2eStart(t, vars(targetURL, false))
	if got := appliedState(t, targetURL); got != applied {
		t.Errorf("after the start on the copy, what the projections applied changed:\n%s\nwant\n%s", got, applied)
	}
	ada = signIn(dst, "ada@example.com")
	bob := signIn(dst, "bob@example.com")
	var page activityAnswer
	dst.expect(t, "GET", "/v1/me/activity", ada, "", http.StatusOK, &page)
	if page.Behind < 2 {
		t.Errorf("GET /v1/me/activity: behind %d with two sign-ins unapplied", page.Behind)
	}
	dst.stop(t)
	if out, err := status(targetURL); err != nil || !statusTable("1", `[2-9]\d*`, `\d+\.\ds`, "running").MatchString(out) {
		t.Errorf("status with two sign-ins unapplied: %q, %v", out, err)
	}
	if !strings.Contains(dst.logs.String(), "came from another cluster") {
		t.Errorf("the start on the copy did not say that the database came from another cluster:\n%s", dst.logs.String())
	}

	// With the projection: it applies the new events after the old ones.
	dst = e2eStart(t, vars(targetURL, true))
	got := awaitActivity(t, dst, ada, func(p activityAnswer) bool { return len(p.Items) > len(adaItems.Items) && p.Behind == 0 })
	if len(got.Items) != len(adaItems.Items)+1 || len(got.Items) == 0 || got.Items[0].Type != adaItems.Items[0].Type {
		t.Errorf("Ada's activity after the restore: %+v, want one more %s before %+v", got.Items, adaItems.Items[0].Type, adaItems.Items)
	}
	awaitActivity(t, dst, bob, func(p activityAnswer) bool { return len(p.Items) > 0 && p.Behind == 0 })
	dst.stop(t)
	if out, err := status(targetURL); err != nil || !caughtUp.MatchString(out) {
		t.Errorf("status once applied: %q, %v", out, err)
	}

	// A rebuild on the copy finishes, and builds what the projection held.
	held := activityRows(t, targetURL)
	rctx, cancel := context.WithTimeout(ctx, e2eWait)
	defer cancel()
	out, err := runApp(t, rctx, map[string]string{"DATABASE_URL": targetURL, "DATA_KEY": testDataKey}, "projections", "rebuild", "activity")
	if err != nil || out != "rebuilt activity: version 2 serves reads; version 1 is dropped\n" {
		t.Fatalf("rebuild on the copy: %q, %v", out, err)
	}
	if rebuilt := activityRows(t, targetURL); rebuilt != held {
		t.Errorf("the rebuilt activity differs:\n%s\nwant\n%s", rebuilt, held)
	}

	// An event that a writer knowing no clock put below the offset, as a
	// running instance that reconnects to the copy would: status says the
	// projection is stuck, and fails.
	conn, err = pgx.Connect(ctx, targetURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO events (transaction_id, id, stream_id, version, type, data, schema_version, recorded_at)
SELECT '1', gen_random_uuid(), e.stream_id, (SELECT max(version) FROM events WHERE stream_id = e.stream_id) + 1, e.type, e.data, e.schema_version, now()
FROM events AS e WHERE e.type = 'user.session_started' LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	out, err = status(targetURL)
	if err == nil || !statusTable("2", "1", `\d+\.\ds`, `stuck: .*app migrate.*`).MatchString(out) {
		t.Errorf("status with an event below the offset: %q, %v; want it stuck, and an error", out, err)
	}
}

// activityAnswer is the answer of GET /v1/me/activity.
type activityAnswer struct {
	Items []struct {
		Type string `json:"type"`
	} `json:"items"`
	Behind int64 `json:"behind"`
}

// awaitActivity reads the activity of token's account until done holds,
// and fails t, and returns the last answer, when it does not within
// e2eWait.
func awaitActivity(t *testing.T, a *e2eApp, token string, done func(activityAnswer) bool) activityAnswer {
	t.Helper()
	deadline := time.After(e2eWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var p activityAnswer
		a.expect(t, "GET", "/v1/me/activity", token, "", http.StatusOK, &p)
		if done(p) {
			return p
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Errorf("the activity did not come within %s: %+v", e2eWait, p)
			return p
		}
	}
}

// appliedState describes what the projections of the database at
// databaseURL have applied: their offsets and the activity's rows.
func appliedState(t *testing.T, databaseURL string) string {
	t.Helper()
	return queryText(t, databaseURL, `SELECT consumer_group, last_transaction_id::text, last_position FROM projection_offsets ORDER BY 1`) +
		activityRows(t, databaseURL)
}

// activityRows lists the rows of the activity that serves reads.
func activityRows(t *testing.T, databaseURL string) string {
	t.Helper()
	return queryText(t, databaseURL, `SELECT user_id, position_commit, position_seq, type FROM activity ORDER BY 1, 2, 3`)
}

// queryText returns the rows of q as lines of text.
func queryText(t *testing.T, databaseURL, q string) string {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, vals...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
