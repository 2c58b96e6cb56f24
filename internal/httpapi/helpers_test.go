package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
	"github.com/eventsourced/accounts/internal/user/mail/mailtest"
)

const baseURL = "https://accounts.test"

// start is where every test's clock begins: a whole second, so that the
// microsecond truncation of the unit of work changes nothing.
var start = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

const (
	linkTTL    = 15 * time.Minute
	sessionTTL = 30 * 24 * time.Hour
	maxBody    = 4 << 10
)

// env is one test's API: the real HTTP server over a real user.Service on
// its own PostgreSQL schema, with a clock the test moves by hand.
type env struct {
	url    string
	client *http.Client
	db     *postgres.DB
	// clock is the service's and the server's.
	clock *testclock.Clock
	// outbox is where the service adds its mails; runner and events are
	// its units of work and event store.
	outbox outbox.Store
	runner uow.Runner
	events eventstore.Store
	// keys seals and opens the addresses in the events.
	keys *keyring.Keyring
	// log and activity are the event log and the activity projection.
	log      async.Log
	activity activityProjection
}

// activityProjection is what the tests need of a backend's activity.
type activityProjection interface {
	projections.Projection
	httpapi.ActivityReader
}

type options struct {
	rateLimit int
	// ready replaces db.Ping when set.
	ready func(context.Context) error
	// readTimeout is the server's ReadTimeout; zero for none.
	readTimeout time.Duration
}

func setup(t *testing.T) *env {
	t.Helper()
	return setupWith(t, options{})
}

func setupWith(t *testing.T, o options) *env {
	t.Helper()
	return servePostgres(t, pgtest.New(t), o)
}

// servePostgres serves the API over a user.Service on db.
func servePostgres(t *testing.T, db *postgres.DB, o options) *env {
	t.Helper()
	clock := testclock.New(start)
	keys := keyringtest.New(t, postgres.DataKeys{})
	e := serveService(t, clock, user.Deps{
		Runner: db.Runner(clock.Now),
		Events: db.Events(),
		Outbox: db.Outbox(),
		Views:  postgres.UserViews{},
		Keys:   keys,
	}, db.Ping, o, user.ActivityProjection{Store: db.ActivityStore(), Log: db.Log(postgres.LogConfig{}), Keys: keys})
	e.db, e.log, e.activity = db, db.Log(postgres.LogConfig{PollInterval: 5 * time.Millisecond}), user.ActivityProjection{Store: db.ActivityStore(), Log: db.Log(postgres.LogConfig{}), Keys: keys}
	return e
}

// serveService serves the API over a user.Service on d, whose runner reads
// clock, and answers /readyz with ready unless o says otherwise. The env's
// db is left nil: the helpers that read tables are for PostgreSQL, and
// [servePostgres] sets it.
func serveService(t *testing.T, clock *testclock.Clock, d user.Deps, ready func(context.Context) error, o options, activity httpapi.ActivityReader) *env {
	t.Helper()
	e := &env{clock: clock, outbox: d.Outbox, runner: d.Runner, events: d.Events, keys: d.Keys}
	svc, err := user.NewService(d, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	if o.ready != nil {
		ready = o.ready
	}
	srv := httptest.NewUnstartedServer(httpapi.NewServer(httpapi.Deps{
		Users:     svc,
		Activity:  activity,
		Ready:     ready,
		Log:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		RateLimit: o.rateLimit,
		Now:       e.clock.Now,
	}))
	srv.Config.ReadTimeout = o.readTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.client = srv.Client()
	return e
}

// response is what the server answered.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string {
	return strconv.Itoa(r.status) + " " + r.header.Get("Content-Type") + " " + string(r.body)
}

// request is one request to send.
type request struct {
	method string
	path   string
	// token, when set, goes in Authorization: Bearer.
	token string
	// header is set on the request after token; it may override
	// Authorization and Content-Type.
	header map[string]string
	body   string
	// noContentType sends a body without a Content-Type.
	noContentType bool
}

// send sends r and returns the answer. It fails the test on a 5xx other
// than 503, which only /readyz may answer.
func (e *env) send(t *testing.T, r request) response {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(t.Context(), r.method, e.url+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.body != "" && !r.noContentType {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", r.method, r.path, err)
	}
	out := response{status: res.StatusCode, header: res.Header, body: b}
	checkContract(t, r.method, r.path, []byte(r.body), out)
	if out.status >= 500 && out.status != http.StatusServiceUnavailable {
		t.Errorf("%s %s: server error %s", r.method, r.path, out)
	}
	return out
}

func (e *env) post(t *testing.T, path, token, body string) response {
	t.Helper()
	return e.send(t, request{method: http.MethodPost, path: path, token: token, body: body})
}

func (e *env) get(t *testing.T, path, token string) response {
	t.Helper()
	return e.send(t, request{method: http.MethodGet, path: path, token: token})
}

// jsonString returns s as a JSON string literal.
func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func emailBody(email string) string    { return `{"email":` + jsonString(email) + `}` }
func codeBody(code string) string      { return `{"code":` + jsonString(code) + `}` }
func newEmailBody(email string) string { return `{"new_email":` + jsonString(email) + `}` }

// knownTypes are the problem types of the API.
var knownTypes = map[string]int{
	httpapi.TypeBadRequest:           http.StatusBadRequest,
	httpapi.TypeBodyTooLarge:         http.StatusRequestEntityTooLarge,
	httpapi.TypeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	httpapi.TypeBadEmail:             http.StatusBadRequest,
	httpapi.TypeInvalidCode:          0, // 400 or 401, by endpoint
	httpapi.TypeUnauthenticated:      http.StatusUnauthorized,
	httpapi.TypeEmailTaken:           http.StatusConflict,
	httpapi.TypeTooManyRequests:      http.StatusTooManyRequests,
	httpapi.TypeNotFound:             http.StatusNotFound,
	httpapi.TypeMethodNotAllowed:     http.StatusMethodNotAllowed,
	httpapi.TypeNotReady:             http.StatusServiceUnavailable,
	httpapi.TypeBusy:                 http.StatusServiceUnavailable,
	httpapi.TypeUnavailable:          http.StatusServiceUnavailable,
	httpapi.TypeInternal:             http.StatusInternalServerError,
	httpapi.TypeInvalidName:          http.StatusBadRequest,
	httpapi.TypeInvalidRole:          http.StatusBadRequest,
	httpapi.TypeNotOwner:             http.StatusForbidden,
	httpapi.TypeWrongAddress:         http.StatusForbidden,
	httpapi.TypeAlreadyMember:        http.StatusConflict,
	httpapi.TypeLastOwner:            http.StatusConflict,
	httpapi.TypeTooManyOrganizations: http.StatusConflict,
	httpapi.TypeOrganizationFull:     http.StatusConflict,
}

// parseProblem checks that r is a well-formed problem+json answer and
// returns it.
func parseProblem(t *testing.T, what string, r response) (httpapi.Problem, bool) {
	t.Helper()
	mt, _, err := mime.ParseMediaType(r.header.Get("Content-Type"))
	if err != nil || mt != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json (%s)", what, r.header.Get("Content-Type"), r)
		return httpapi.Problem{}, false
	}
	var p httpapi.Problem
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Errorf("%s: problem body %q: %v", what, r.body, err)
		return p, false
	}
	if p.Status != r.status {
		t.Errorf("%s: problem status %d in a %d answer", what, p.Status, r.status)
	}
	if p.Title == "" {
		t.Errorf("%s: problem %s has no title", what, p.Type)
	}
	if id := r.header.Get(requestid.Header); p.RequestID != id {
		t.Errorf("%s: problem request_id %q in an answer whose X-Request-Id is %q", what, p.RequestID, id)
	}
	if _, ok := knownTypes[p.Type]; !ok {
		t.Errorf("%s: unknown problem type %q", what, p.Type)
	}
	return p, true
}

// wantProblem checks that r is a problem of typ with status.
func wantProblem(t *testing.T, what string, r response, status int, typ string) httpapi.Problem {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d (%s)", what, r.status, status, r)
	}
	p, ok := parseProblem(t, what, r)
	if ok && p.Type != typ {
		t.Errorf("%s: problem type %q, want %q (%s)", what, p.Type, typ, r)
	}
	return p
}

// wantStatus checks a successful answer's status.
func wantStatus(t *testing.T, what string, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d (%s)", what, r.status, status, r)
	}
}

// wantRetryAfter checks that r has a Retry-After of whole seconds above 0
// and returns it.
func wantRetryAfter(t *testing.T, what string, r response) time.Duration {
	t.Helper()
	v := r.header.Get("Retry-After")
	secs, err := strconv.Atoi(v)
	if err != nil || secs <= 0 {
		t.Errorf("%s: Retry-After %q, want whole seconds above 0", what, v)
		return 0
	}
	return time.Duration(secs) * time.Second
}

// wantKeys decodes an object and checks that it has exactly keys.
func wantKeys(t *testing.T, what string, body []byte, keys ...string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: body %q is not a JSON object: %v", what, body, err)
	}
	if len(m) != len(keys) {
		t.Errorf("%s: body %s has %d keys, want exactly %v", what, body, len(m), keys)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: body %s lacks %q", what, body, k)
		}
	}
	return m
}

// snapshot is the row count and a digest of the contents of every table the
// domain writes.
type snapshot map[string]string

var tables = []string{"events", "outbox_messages", "users", "sessions", "signin_codes", "email_change_codes"}

func (e *env) snapshot(t *testing.T) snapshot {
	t.Helper()
	s := snapshot{}
	for _, table := range tables {
		var v string
		err := e.db.Pool().QueryRow(t.Context(), `SELECT count(*)::text || ' rows, digest ' || coalesce(md5(string_agg(x::text, '|' ORDER BY x::text)), '-') FROM `+table+` x`).Scan(&v)
		if err != nil {
			t.Fatalf("snapshot of %s: %v", table, err)
		}
		s[table] = v
	}
	return s
}

func (e *env) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.Pool().QueryRow(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// unchanged checks that nothing changed since before: in particular no
// event and no outbox message was added.
func (e *env) unchanged(t *testing.T, what string, before snapshot) {
	t.Helper()
	after := e.snapshot(t)
	for _, table := range tables {
		if before[table] != after[table] {
			t.Errorf("%s changed table %s: %s -> %s", what, table, before[table], after[table])
		}
	}
}

// mails returns the mails added to the outbox since the last call, oldest
// first, and removes them from the outbox as a relay would.
func (e *env) mails(t *testing.T) []mailtest.Sent {
	t.Helper()
	return mailtest.Take(t, e.outbox, e.clock.Now().Add(100*365*24*time.Hour))
}

// oneMail returns the code of the one mail sent since the last call and
// checks its topic, recipient and link.
func (e *env) oneMail(t *testing.T, topic, to, path string) string {
	t.Helper()
	ms := e.mails(t)
	if len(ms) != 1 {
		t.Fatalf("outbox got %d new messages, want 1: %+v", len(ms), ms)
	}
	m := ms[0]
	if m.Topic != topic || m.Link.To != to || m.Link.URL != baseURL+path+"?code="+m.Link.Code || m.Link.Code == "" {
		t.Fatalf("mail %+v, want topic %s to %s with a link to %s", m, topic, to, path)
	}
	return m.Link.Code
}

// link asks for a sign-in link for address through the API and returns the
// code mailed to normalized.
func (e *env) link(t *testing.T, address, normalized string) string {
	t.Helper()
	r := e.post(t, "/v1/sign-in-links", "", emailBody(address))
	wantStatus(t, "POST /v1/sign-in-links "+address, r, http.StatusAccepted)
	return e.oneMail(t, mail.TopicLoginLink, normalized, "/sign-in")
}

// session is the answer to a sign-in.
type session struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	User      struct {
		ID    uuid.UUID `json:"id"`
		Email string    `json:"email"`
	} `json:"user"`
}

// signInWith signs in with code and returns the session.
func (e *env) signInWith(t *testing.T, code string) session {
	t.Helper()
	r := e.post(t, "/v1/sessions", "", codeBody(code))
	wantStatus(t, "POST /v1/sessions", r, http.StatusCreated)
	var s session
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatalf("session %s: %v", r.body, err)
	}
	return s
}

// signIn asks for a link to a normalized address and signs in with it.
func (e *env) signIn(t *testing.T, email string) session {
	t.Helper()
	return e.signInWith(t, e.link(t, email, email))
}

// me is the answer of GET /v1/me.
type me struct {
	ID        uuid.UUID `json:"id"`
	Email     string    `json:"email"`
	CreatedAt time.Time `json:"created_at"`
}

func (e *env) me(t *testing.T, token string) me {
	t.Helper()
	r := e.get(t, "/v1/me", token)
	wantStatus(t, "GET /v1/me", r, http.StatusOK)
	var m me
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("me %s: %v", r.body, err)
	}
	return m
}

// wantUnauthenticated checks a 401 of a bearer endpoint.
func wantUnauthenticated(t *testing.T, what string, r response) {
	t.Helper()
	wantProblem(t, what, r, http.StatusUnauthorized, httpapi.TypeUnauthenticated)
	if h := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(strings.ToLower(h), "bearer") {
		t.Errorf("%s: WWW-Authenticate %q, want a Bearer challenge", what, h)
	}
}
