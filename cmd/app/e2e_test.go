package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgbouncertest"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/smtp"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// e2eWait bounds every wait of these tests; it only turns a hang into a
// failure.
const e2eWait = 30 * time.Second

// e2eDatabases make a fresh database of each backend: PostgreSQL, directly
// and behind a stock PgBouncer in each of its modes, and SQLite.
var e2eDatabases = map[string]func(testing.TB) e2eDatabase{
	"PostgreSQL": func(t testing.TB) e2eDatabase {
		u := pgtest.NewURL(t)
		return e2eDatabase{URL: u, Direct: u}
	},
	"PgBouncer session":     e2eBehindPgBouncer(postgres.PoolerSession),
	"PgBouncer transaction": e2eBehindPgBouncer(postgres.PoolerTransaction),
	"SQLite": func(t testing.TB) e2eDatabase {
		u := "sqlite:" + filepath.Join(t.TempDir(), "accounts.db")
		return e2eDatabase{URL: u, Direct: u}
	},
}

// e2eDatabase is where the app of a whole-app test keeps its data.
type e2eDatabase struct {
	// URL is DATABASE_URL, and Pooler DATABASE_POOLER.
	URL, Pooler string
	// Direct reaches the same data without a pooler, for the test's own
	// looks at it.
	Direct string
}

// env returns vars with the variables that point the app at d.
func (d e2eDatabase) env(vars map[string]string) map[string]string {
	vars["DATABASE_URL"] = d.URL
	if d.Pooler != "" {
		vars["DATABASE_POOLER"] = d.Pooler
	}
	return vars
}

// mailing returns the variables of an app on d that mails through mx,
// from accounts@accounts.test, with its links to http://accounts.test,
// and vars, which add to these or replace them.
func (d e2eDatabase) mailing(mx *smtptest.Server, vars map[string]string) map[string]string {
	env := map[string]string{
		"DATA_KEY":        testDataKey,
		"HTTP_ADDR":       "127.0.0.1:0",
		"SMTP_URL":        mx.URL(),
		"BASE_URL":        "http://accounts.test",
		"MAIL_FROM":       "accounts@accounts.test",
		"OUTBOX_INTERVAL": "1h", // Only wake-ups on commit can deliver in time.
	}
	maps.Copy(env, vars)
	return d.env(env)
}

// e2eBehindPgBouncer makes a fresh PostgreSQL schema reached through a
// PgBouncer of its own in mode.
func e2eBehindPgBouncer(mode postgres.Pooler) func(testing.TB) e2eDatabase {
	return func(t testing.TB) e2eDatabase {
		u := pgtest.NewURL(t)
		bouncer := pgbouncertest.Start(t, mode, pgtest.URL())
		return e2eDatabase{URL: bouncer.URL(t, u), Pooler: string(mode), Direct: u}
	}
}

// TestEndToEnd runs the whole app, API and relay, on each backend and a
// real SMTP server, and walks a person through sign-in, email change and
// sign-out by the mails the SMTP server received; and, with BASE_URL
// unset, has the links point at the address it listens on.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	for name, database := range e2eDatabases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			endToEnd(t, database(t))
		})
	}
	t.Run("LinksPointAtTheListenAddressByDefault", testLinksPointAtTheListenAddressByDefault)
}

func endToEnd(t *testing.T, database e2eDatabase) {
	mx := smtptest.NewServer(t)
	app := e2eStart(t, database.mailing(mx, nil))

	// Ask for a sign-in link; the address is normalised.
	app.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"Ada@Example.com"}`, http.StatusAccepted, nil)
	signIn := mx.Wait(t, 1, e2eWait)[0]
	signInID := e2eCheckMail(t, signIn, "ada@example.com", "Your sign-in link")
	code := e2eLinkCode(t, signIn, "http://accounts.test/sign-in?code=")

	// Sign in with the code from the mail: the first sign-in creates the user.
	var session struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
		User      struct {
			ID    uuid.UUID `json:"id"`
			Email string    `json:"email"`
		} `json:"user"`
	}
	app.expect(t, "POST", "/v1/sessions", "", e2eJSON(t, map[string]string{"code": code}), http.StatusCreated, &session)
	if session.Token == "" || session.User.ID == uuid.Nil || session.User.Email != "ada@example.com" || !session.ExpiresAt.After(time.Now()) {
		t.Fatalf("POST /v1/sessions: %+v, want a token, a future expiry and the user ada@example.com", session)
	}
	token := session.Token

	type me struct {
		ID        uuid.UUID  `json:"id"`
		Email     string     `json:"email"`
		CreatedAt *time.Time `json:"created_at"`
	}
	var who me
	app.expect(t, "GET", "/v1/me", token, "", http.StatusOK, &who)
	if who.ID != session.User.ID || who.Email != "ada@example.com" || who.CreatedAt == nil || who.CreatedAt.IsZero() {
		t.Fatalf("GET /v1/me: %+v, want user %s with ada@example.com and a creation time", who, session.User.ID)
	}
	// A code works once.
	app.expect(t, "POST", "/v1/sessions", "", e2eJSON(t, map[string]string{"code": code}), http.StatusUnauthorized, nil)

	// Change the address: the confirmation goes to the new one.
	app.expect(t, "POST", "/v1/me/email-change", token, `{"new_email":"grace@example.com"}`, http.StatusAccepted, nil)
	change := mx.Wait(t, 2, e2eWait)[1]
	changeID := e2eCheckMail(t, change, "grace@example.com", "Confirm your new email address")
	changeCode := e2eLinkCode(t, change, "http://accounts.test/confirm-email?code=")
	if changeID == signInID {
		t.Errorf("both mails carry the Message-ID %s; each outbox message has its own ID", signInID)
	}
	if changeCode == code {
		t.Errorf("the confirmation code repeats the sign-in code %q", code)
	}

	var changed me
	app.expect(t, "POST", "/v1/email-changes", token, e2eJSON(t, map[string]string{"code": changeCode}), http.StatusOK, &changed)
	if changed.ID != session.User.ID || changed.Email != "grace@example.com" {
		t.Fatalf("POST /v1/email-changes: %+v, want user %s with grace@example.com", changed, session.User.ID)
	}
	app.expect(t, "GET", "/v1/me", token, "", http.StatusOK, &who)
	if who.ID != session.User.ID || who.Email != "grace@example.com" {
		t.Fatalf("GET /v1/me after the change: %+v, want grace@example.com", who)
	}

	// The address it left is told, the new one masked, with a link that
	// undoes the change.
	notice := mx.Wait(t, 3, e2eWait)[2]
	e2eCheckMail(t, notice, "ada@example.com", "Your email address was changed")
	undoCode := e2eLinkCode(t, notice, "http://accounts.test/undo-email?code=")
	if !strings.Contains(notice.Text, "g***@e***.com") || strings.Contains(notice.Text, "grace@") {
		t.Errorf("the notice does not name the new address masked, or names it whole:\n%s", notice.Text)
	}

	// Sign out: the token no longer works.
	app.expect(t, "DELETE", "/v1/sessions/current", token, "", http.StatusNoContent, nil)
	app.expect(t, "GET", "/v1/me", token, "", http.StatusUnauthorized, nil)

	// The undo link moves the account back; it works once.
	var restored me
	app.expect(t, "POST", "/v1/email-changes/undo", "", e2eJSON(t, map[string]string{"code": undoCode}), http.StatusOK, &restored)
	if restored.ID != session.User.ID || restored.Email != "ada@example.com" {
		t.Fatalf("POST /v1/email-changes/undo: %+v, want user %s with ada@example.com", restored, session.User.ID)
	}
	app.expect(t, "POST", "/v1/email-changes/undo", "", e2eJSON(t, map[string]string{"code": undoCode}), http.StatusBadRequest, nil)

	// Each topic's delivery is counted. The relay counts a delivery just
	// after the SMTP server has taken the mail, so the count may trail the
	// mail by a moment.
	for _, topic := range []string{mail.TopicLoginLink, mail.TopicEmailChange, mail.TopicEmailChanged} {
		app.awaitMetric(t, "outbox_delivered_total", topic)
	}
	if got := len(mx.Messages()); got != 3 {
		t.Errorf("the SMTP server received %d mails, want 3", got)
	}
	app.stop(t)
}

// TestRefusedMailIsRetriedThenBuried drives the relay by hand on a clock of
// its own against an SMTP server that refuses every recipient for now: the
// message is retried after each backoff, never before, buried on its last
// attempt with the server's reply as its reason, and no mail is sent. Once
// the server accepts again, a new message is delivered on the first pass;
// one whose recipient the server refuses for good is buried on its first.
func TestRefusedMailIsRetriedThenBuried(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.New(t)
	mx := smtptest.NewServer(t)
	clock := testclock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))

	const maxAttempts = 3
	rel := e2eMailRelay(t, db.Outbox(), mx, clock, outbox.RelayConfig{MaxAttempts: maxAttempts})
	added := &e2eRecordingOutbox{Outbox: db.Outbox()}
	keys := keyringtest.New(t, postgres.DataKeys{})
	users, err := user.NewService(user.Deps{
		Runner: db.Runner(clock.Now),
		Events: db.Events(),
		Outbox: added,
		Views:  postgres.UserViews{},
		Keys:   keys,
	}, user.Policy{}, "http://accounts.test")
	if err != nil {
		t.Fatal(err)
	}
	drain := func(want relay.DrainStats) {
		t.Helper()
		got, err := rel.Drain(ctx)
		if err != nil {
			t.Fatalf("drain at %s: %v", clock.Now().Format(time.RFC3339Nano), err)
		}
		if got != want {
			t.Fatalf("drain at %s: %+v, want %+v", clock.Now().Format(time.RFC3339Nano), got, want)
		}
	}

	mx.Refuse(450, "4.2.1 mailbox unavailable")
	if err := users.RequestSignInLink(ctx, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	id := added.only(t)

	var reason string
	for attempt := 1; attempt < maxAttempts; attempt++ {
		drain(relay.DrainStats{Claimed: 1, Retried: 1})
		rec, err := db.Outbox().Lookup(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rec.LastError, "450") || !strings.Contains(rec.LastError, "4.2.1 mailbox unavailable") {
			t.Errorf("attempt %d: last error %q, want the server's 450 reply", attempt, rec.LastError)
		}
		if want := clock.Now().Add(outbox.Backoff(attempt)); !rec.DueAt.Equal(want) {
			t.Errorf("attempt %d: due at %s, want now + Backoff(%d) = %s", attempt, rec.DueAt, attempt, want)
		}
		if rec.Attempts != attempt || !rec.BuriedAt.IsZero() {
			t.Errorf("attempt %d: %d attempts, buried at %s; want %d attempts, not buried", attempt, rec.Attempts, rec.BuriedAt, attempt)
		}
		reason = rec.LastError

		// Not due a moment before its backoff has passed...
		clock.Advance(outbox.Backoff(attempt) - time.Millisecond)
		drain(relay.DrainStats{})
		// ...and due once it has.
		clock.Advance(time.Millisecond)
	}
	drain(relay.DrainStats{Claimed: 1, Buried: 1})

	buried, err := db.Outbox().Buried(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(buried) != 1 || buried[0].ID != id {
		t.Fatalf("buried: %+v, want only message %s", buried, id)
	}
	b := buried[0]
	if b.Topic != mail.TopicLoginLink || b.Attempts != maxAttempts || b.BuriedAt.IsZero() {
		t.Errorf("buried message: topic %q, %d attempts, buried at %s; want %s after %d attempts",
			b.Topic, b.Attempts, b.BuriedAt, mail.TopicLoginLink, maxAttempts)
	}
	if !strings.Contains(b.LastError, "450") || !strings.Contains(b.LastError, "4.2.1 mailbox unavailable") {
		t.Errorf("buried with reason %q, want the server's 450 reply", b.LastError)
	}
	if b.LastError != reason {
		t.Errorf("buried with reason %q, want the same SMTP error as the retries: %q", b.LastError, reason)
	}
	// A buried message stays buried, however long one waits.
	clock.Advance(outbox.Backoff(maxAttempts))
	drain(relay.DrainStats{})
	if got := mx.Messages(); len(got) != 0 {
		t.Fatalf("the refusing server received %d mails: %+v", len(got), got)
	}

	// The server accepts again: a new message goes out on the first pass,
	// and the buried one stays where it is.
	mx.Refuse(0, "")
	if err := users.RequestSignInLink(ctx, "grace@example.com"); err != nil {
		t.Fatal(err)
	}
	next := added.only(t)
	drain(relay.DrainStats{Claimed: 1, Delivered: 1})
	got := mx.Messages()
	if len(got) != 1 {
		t.Fatalf("the server received %d mails, want 1", len(got))
	}
	if gotID := e2eCheckMail(t, got[0], "grace@example.com", "Your sign-in link"); gotID != next {
		t.Errorf("the mail's Message-ID names %s, want the outbox message %s", gotID, next)
	}
	e2eLinkCode(t, got[0], "http://accounts.test/sign-in?code=")
	if _, err := db.Outbox().Lookup(ctx, next); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("the delivered message is still in the outbox: %v", err)
	}
	if rec, err := db.Outbox().Lookup(ctx, id); err != nil || rec.BuriedAt.IsZero() {
		t.Errorf("the buried message after the delivery: %+v, %v; want it still buried", rec, err)
	}

	// A recipient that the server refuses for good: buried at once.
	mx.Refuse(550, "5.1.1 no such mailbox")
	if err := users.RequestSignInLink(ctx, "nobody@example.com"); err != nil {
		t.Fatal(err)
	}
	gone := added.only(t)
	drain(relay.DrainStats{Claimed: 1, Buried: 1})
	rec, err := db.Outbox().Lookup(ctx, gone)
	if err != nil {
		t.Fatal(err)
	}
	if rec.BuriedAt.IsZero() || rec.Attempts != 1 || !strings.Contains(rec.LastError, "5.1.1 no such mailbox") {
		t.Errorf("refused for good: buried at %s after %d attempts, reason %q; want buried after 1 with the server's reply",
			rec.BuriedAt, rec.Attempts, rec.LastError)
	}
}

// e2eApp is the app running `serve` in a goroutine.
type e2eApp struct {
	base   string // http://127.0.0.1:PORT
	client *http.Client
	cancel context.CancelFunc
	done   chan error
	logs   *e2eLogs
	// result is run's error once it has returned.
	result   error
	returned bool
}

// e2eStart runs `app serve` with env until the test ends, and returns once
// it listens. The app is stopped before the database and SMTP server that
// env names, which the caller set up first, are taken down.
func e2eStart(t *testing.T, env map[string]string) *e2eApp {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	app := &e2eApp{
		client: &http.Client{Timeout: e2eWait},
		cancel: cancel,
		done:   make(chan error, 1),
		logs:   newE2ELogs(),
	}
	go func() { app.done <- run(ctx, []string{"serve"}, getenv(env), io.Discard, app.logs) }()
	t.Cleanup(func() {
		if !app.returned {
			cancel()
			select {
			case app.result = <-app.done:
				app.returned = true
			case <-time.After(e2eWait):
				t.Errorf("serve did not stop within %s of its context's end", e2eWait)
			}
		}
		if t.Failed() {
			t.Logf("app logs:\n%s", app.logs.String())
		}
	})
	select {
	case addr := <-app.logs.listening:
		app.base = "http://" + addr
	case err := <-app.done:
		app.returned, app.result = true, err
		t.Fatalf("serve returned before it listened: %v\n%s", err, app.logs.String())
	case <-time.After(e2eWait):
		t.Fatalf("serve did not log its listening address within %s:\n%s", e2eWait, app.logs.String())
	}
	return app
}

// stop cancels the app's context and checks that run returns nil.
func (a *e2eApp) stop(t *testing.T) {
	t.Helper()
	a.cancel()
	select {
	case a.result = <-a.done:
		a.returned = true
	case <-time.After(e2eWait):
		t.Fatalf("serve did not stop within %s of its context's end", e2eWait)
	}
	if a.result != nil {
		t.Fatalf("serve returned %v after its context ended, want nil", a.result)
	}
}

// expect makes a request with an optional bearer token and JSON body and
// fails t unless the answer has status; a JSON answer is decoded into out
// when out is not nil. Error answers must be application/problem+json.
func (a *e2eApp) expect(t *testing.T, method, path, token, body string, status int, out any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, a.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	if resp.StatusCode != status {
		t.Fatalf("%s %s: %s %s, want %d", method, path, resp.Status, raw, status)
	}
	if ct := resp.Header.Get("Content-Type"); status >= 400 && !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("%s %s: %d answered as %q, want application/problem+json", method, path, status, ct)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: answer %s: %v", method, path, raw, err)
		}
	}
}

// awaitMetric waits until /metrics counts at least one of name for topic.
func (a *e2eApp) awaitMetric(t *testing.T, name, topic string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
	label := `topic="` + topic + `"`
	deadline := time.After(e2eWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var text string
	for {
		resp, err := a.client.Get(a.base + "/metrics")
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %s, %v", resp.Status, err)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Fatalf("GET /metrics answered as %q, want the Prometheus text format", ct)
		}
		text = string(raw)
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			if !e2eHasLabel(m[1], label) {
				continue
			}
			var v float64
			if _, err := fmt.Sscan(m[2], &v); err == nil && v >= 1 {
				return
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("/metrics did not count %s{%s} within %s:\n%s", name, label, e2eWait, text)
		}
	}
}

// e2eHasLabel reports whether the comma-separated Prometheus labels
// hold label.
func e2eHasLabel(labels, label string) bool {
	for l := range strings.SplitSeq(labels, ",") {
		if l == label {
			return true
		}
	}
	return false
}

// e2eCheckMail checks a mail's envelope, subject and Message-ID, which
// must be <UUID@accounts.test>, and returns the UUID.
func e2eCheckMail(t *testing.T, m smtptest.Message, to, subject string) uuid.UUID {
	t.Helper()
	if len(m.To) != 1 || m.To[0] != to || m.From != "accounts@accounts.test" {
		t.Errorf("mail envelope from %q to %v, want from accounts@accounts.test to [%s]", m.From, m.To, to)
	}
	if s := m.Header.Get("Subject"); s != subject {
		t.Errorf("mail to %s: subject %q, want %q", to, s, subject)
	}
	raw := m.Header.Get("Message-ID")
	match := regexp.MustCompile(`^<([^@<>]+)@accounts\.test>$`).FindStringSubmatch(raw)
	if match == nil {
		t.Fatalf("mail to %s: Message-ID %q, want <UUID@accounts.test>", to, raw)
	}
	id, err := uuid.Parse(match[1])
	if err != nil || id == uuid.Nil || id.String() != match[1] {
		t.Fatalf("mail to %s: Message-ID %q does not carry a UUID: %v", to, raw, err)
	}
	return id
}

// e2eLinkCode finds in a mail's text part the link starting with prefix and
// its code, each on a line of its own, and returns the code.
func e2eLinkCode(t *testing.T, m smtptest.Message, prefix string) string {
	t.Helper()
	match := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `([a-z2-7]+)\r?$`).FindStringSubmatch(m.Text)
	if match == nil {
		t.Fatalf("the mail's text part lacks a line with the link %s...:\n%s", prefix, m.Text)
	}
	code := match[1]
	if !regexp.MustCompile(`(?m)^` + code + `\r?$`).MatchString(m.Text) {
		t.Fatalf("the mail's text part lacks the code %q on a line of its own:\n%s", code, m.Text)
	}
	if !strings.Contains(m.HTML, prefix+code) {
		t.Errorf("the mail's HTML part lacks the link %s%s:\n%s", prefix, code, m.HTML)
	}
	return code
}

// e2eMails reads the mails an SMTP server of the tests received, in order.
type e2eMails struct {
	mx   *smtptest.Server
	read int
}

// nextCode waits for the next mail, checks that it went to to alone, and
// returns the code of its link to path.
func (m *e2eMails) nextCode(t *testing.T, to, path string) string {
	t.Helper()
	m.read++
	mail := m.mx.Wait(t, m.read, e2eWait)[m.read-1]
	if len(mail.To) != 1 || mail.To[0] != to {
		t.Fatalf("mail %d went to %v, want %s", m.read, mail.To, to)
	}
	return e2eLinkCode(t, mail, "http://accounts.test"+path+"?code=")
}

// e2eSession is what POST /v1/sessions answers, as far as the tests read
// it.
type e2eSession struct {
	Token string `json:"token"`
	User  struct {
		ID uuid.UUID `json:"id"`
	} `json:"user"`
}

// signIn asks for a link to email, signs in with the code of the next
// mail, which must be that link, and returns the session.
func (a *e2eApp) signIn(t *testing.T, mails *e2eMails, email string) e2eSession {
	t.Helper()
	a.expect(t, "POST", "/v1/sign-in-links", "", e2eJSON(t, map[string]string{"email": email}), http.StatusAccepted, nil)
	var s e2eSession
	a.expect(t, "POST", "/v1/sessions", "", e2eJSON(t, map[string]string{"code": mails.nextCode(t, email, "/sign-in")}), http.StatusCreated, &s)
	return s
}

func e2eJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// e2eLogs keeps what the app logs and sends the address of the log line
// `msg="http listening" addr=...` (or its JSON) once. Safe for concurrent
// use.
type e2eLogs struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	found     bool
	listening chan string
	watches   []e2eWatch
}

// e2eWatch is a text awaited in the logs, and its signal.
type e2eWatch struct {
	want string
	seen chan struct{}
}

// seen returns a channel that is closed once the logs hold want.
func (l *e2eLogs) seen(want string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := e2eWatch{want: want, seen: make(chan struct{})}
	if bytes.Contains(l.buf.Bytes(), []byte(want)) {
		close(w.seen)
		return w.seen
	}
	l.watches = append(l.watches, w)
	return w.seen
}

var e2eListening = regexp.MustCompile(`msg="http listening" addr=(\S+)|"msg":"http listening","addr":"([^"]+)"`)

func newE2ELogs() *e2eLogs { return &e2eLogs{listening: make(chan string, 1)} }

func (l *e2eLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	kept := l.watches[:0]
	for _, w := range l.watches {
		// slog writes a line a call.
		if bytes.Contains(p, []byte(w.want)) {
			close(w.seen)
			continue
		}
		kept = append(kept, w)
	}
	l.watches = kept
	if !l.found {
		if m := e2eListening.FindSubmatch(l.buf.Bytes()); m != nil {
			l.found = true
			l.listening <- string(m[1]) + string(m[2])
		}
	}
	return len(p), nil
}

func (l *e2eLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// e2eRecordingOutbox is an outbox store that notes the IDs of the messages
// added through it.
type e2eRecordingOutbox struct {
	user.Outbox
	mu  sync.Mutex
	ids []uuid.UUID
}

func (o *e2eRecordingOutbox) Add(ctx context.Context, tx uow.Tx, msgs ...outbox.Message) error {
	if err := o.Outbox.Add(ctx, tx, msgs...); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range msgs {
		o.ids = append(o.ids, m.ID)
	}
	return nil
}

// only returns the one message added since the last call.
func (o *e2eRecordingOutbox) only(t *testing.T) uuid.UUID {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := o.ids
	o.ids = nil
	if len(ids) != 1 {
		t.Fatalf("%d outbox messages added, want 1: %v", len(ids), ids)
	}
	return ids[0]
}

// e2eMailRelay returns a relay of store, on clock, that sends the mail
// topics through mx, closed when t ends.
func e2eMailRelay(t *testing.T, store outbox.RelayStore, mx *smtptest.Server, clock *testclock.Clock, cfg outbox.RelayConfig, opts ...relay.Option) *relay.Relay {
	t.Helper()
	sender, err := smtp.New(mx.URL(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	handlers, err := mail.Handlers(sender, mail.Config{
		From: "accounts@accounts.test", Domain: "accounts.test", Now: clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := relay.New(store, handlers, cfg, append([]relay.Option{relay.WithClock(clock.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rel.Close() })
	return rel
}

// With BASE_URL unset, the links in the mails point at the address the app
// listens on, even one whose port the system chose.
func testLinksPointAtTheListenAddressByDefault(t *testing.T) {
	t.Parallel()
	mx := smtptest.NewServer(t)
	app := e2eStart(t, map[string]string{
		"DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "accounts.db"),
		"HTTP_ADDR":    "127.0.0.1:0",
		"SMTP_URL":     mx.URL(),
	})
	app.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"ada@example.com"}`, http.StatusAccepted, nil)
	code := e2eLinkCode(t, mx.Wait(t, 1, e2eWait)[0], app.base+"/sign-in?code=")
	if code == "" {
		t.Fatal("no code in the link")
	}
	// Requests are counted by route and status, beside the Go runtime's
	// metrics, under the service's name.
	resp, err := app.client.Get(app.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`http_server_requests_total{http_response_status_code="202",http_route="POST /v1/sign-in-links"} 1`,
		`http_server_request_duration_seconds_bucket{`,
		"go_goroutines ",
		`service_name="accounts"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	app.stop(t)
	// The start-up lines say where the data is and where the links point;
	// each request and each mail delivered is logged, never with its code.
	logs := app.logs.String()
	if strings.Contains(logs, code) {
		t.Errorf("the logs hold the code:\n%s", logs)
	}
	for _, want := range []string{
		`msg="database open" backend=sqlite path=/`, `base_url=` + app.base,
		`level=INFO msg=http method=POST route="POST /v1/sign-in-links" path=/v1/sign-in-links status=202`,
		`level=INFO msg="mail: delivered" topic=mail.login_link`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %s:\n%s", want, logs)
		}
	}
}
