package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// TestHappyPath walks every success row of the API table: ask for a link,
// sign in, read oneself, change the address, confirm it, sign out.
func TestHappyPath(t *testing.T) {
	t.Parallel()
	e := setup(t)

	r := e.post(t, "/v1/sign-in-links", "", emailBody("  Ada@Example.COM "))
	wantStatus(t, "POST /v1/sign-in-links", r, http.StatusAccepted)
	if len(r.body) != 0 {
		t.Errorf("202 has body %q, want none", r.body)
	}
	code := e.oneMail(t, mail.TopicLoginLink, "ada@example.com", "/sign-in")
	if n := e.count(t, `SELECT count(*) FROM users`); n != 0 {
		t.Errorf("asking for a link created %d users", n)
	}

	e.clock.Advance(time.Minute)
	signedInAt := e.clock.Now()
	r = e.post(t, "/v1/sessions", "", codeBody(code))
	wantStatus(t, "POST /v1/sessions", r, http.StatusCreated)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("201 Content-Type %q, want application/json", ct)
	}
	top := wantKeys(t, "201 body", r.body, "token", "expires_at", "user")
	wantKeys(t, "201 body's user", top["user"], "id", "email")
	var s session
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Token)*5 < 128 || s.Token == code {
		t.Errorf("token %q, want a fresh secret of at least 128 bits", s.Token)
	}
	if want := signedInAt.Add(sessionTTL); !s.ExpiresAt.Equal(want) {
		t.Errorf("expires_at %s, want now + 30 days = %s", s.ExpiresAt, want)
	}
	if s.User.ID == uuid.Nil || s.User.Email != "ada@example.com" {
		t.Errorf("user %+v, want a new user ada@example.com", s.User)
	}
	if n := e.count(t, `SELECT count(*) FROM users`); n != 1 {
		t.Errorf("the first sign-in made %d users, want 1", n)
	}

	r = e.get(t, "/v1/me", s.Token)
	wantStatus(t, "GET /v1/me", r, http.StatusOK)
	wantKeys(t, "GET /v1/me", r.body, "id", "email", "created_at")
	m := e.me(t, s.Token)
	if m.ID != s.User.ID || m.Email != "ada@example.com" || !m.CreatedAt.Equal(signedInAt) {
		t.Errorf("GET /v1/me = %+v, want %s ada@example.com created at %s", m, s.User.ID, signedInAt)
	}
	// The token is accepted with another spelling of the scheme.
	r = e.send(t, request{method: http.MethodGet, path: "/v1/me", header: map[string]string{"Authorization": "bearer " + s.Token}})
	wantStatus(t, "GET /v1/me with scheme bearer", r, http.StatusOK)

	e.clock.Advance(time.Minute)
	r = e.post(t, "/v1/me/email-change", s.Token, newEmailBody(" New@Example.com "))
	wantStatus(t, "POST /v1/me/email-change", r, http.StatusAccepted)
	if len(r.body) != 0 {
		t.Errorf("202 has body %q, want none", r.body)
	}
	change := e.oneMail(t, mail.TopicEmailChange, "new@example.com", "/confirm-email")
	if got := e.me(t, s.Token).Email; got != "ada@example.com" {
		t.Errorf("before confirmation the address is %q, want the old one", got)
	}

	r = e.post(t, "/v1/email-changes", s.Token, codeBody(change))
	wantStatus(t, "POST /v1/email-changes", r, http.StatusOK)
	e.oneMail(t, mail.TopicEmailChanged, "ada@example.com", "/undo-email")
	wantKeys(t, "POST /v1/email-changes", r.body, "id", "email", "created_at")
	var changed me
	if err := json.Unmarshal(r.body, &changed); err != nil {
		t.Fatal(err)
	}
	if changed.ID != s.User.ID || changed.Email != "new@example.com" || !changed.CreatedAt.Equal(signedInAt) {
		t.Errorf("confirmed user %+v, want %s new@example.com created at %s", changed, s.User.ID, signedInAt)
	}
	if got := e.me(t, s.Token); got != changed {
		t.Errorf("GET /v1/me after the change = %+v, want %+v", got, changed)
	}

	// A second session of the same user survives the sign-out of the first.
	other := e.signIn(t, "new@example.com")
	if other.User.ID != s.User.ID {
		t.Errorf("signing in with the new address reached user %s, want %s", other.User.ID, s.User.ID)
	}
	r = e.send(t, request{method: http.MethodDelete, path: "/v1/sessions/current", token: s.Token})
	wantStatus(t, "DELETE /v1/sessions/current", r, http.StatusNoContent)
	if len(r.body) != 0 {
		t.Errorf("204 has body %q", r.body)
	}
	wantUnauthenticated(t, "GET /v1/me after sign-out", e.get(t, "/v1/me", s.Token))
	if got := e.me(t, other.Token); got.ID != s.User.ID {
		t.Errorf("the other session sees %+v", got)
	}
}

// TestEmailChangeTellsNothingOfOtherAccounts: a request to move to an
// address that has an account is answered exactly as one to a free address,
// and counts against the limit alike, so probing addresses costs the limit
// and learns nothing; the owner of the taken address gets a mail that says
// so, with no link.
func TestEmailChangeTellsNothingOfOtherAccounts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ada := e.signIn(t, "ada@example.com")
	e.signIn(t, "bob@example.com")

	taken := e.post(t, "/v1/me/email-change", ada.Token, newEmailBody("  BOB@Example.com"))
	ms := e.mails(t)
	if len(ms) != 1 || ms[0].Topic != mail.TopicEmailTaken || ms[0].Link.To != "bob@example.com" || ms[0].Link.URL != "" || ms[0].Link.Code != "" {
		t.Fatalf("mails %+v, want one on %s to bob@example.com with no link", ms, mail.TopicEmailTaken)
	}
	free := e.post(t, "/v1/me/email-change", ada.Token, newEmailBody("new@example.com"))
	e.oneMail(t, mail.TopicEmailChange, "new@example.com", "/confirm-email")
	// Only the date and each request's own ID may differ.
	for _, h := range []http.Header{taken.header, free.header} {
		h.Del("Date")
		h.Del(requestid.Header)
	}
	if taken.String() != free.String() || fmt.Sprint(taken.header) != fmt.Sprint(free.header) {
		t.Errorf("a taken address is answered %s %v, a free one %s %v; want the same", taken, taken.header, free, free.header)
	}
	wantStatus(t, "email change to a taken address", taken, http.StatusAccepted)

	// Every request counts: 5 in the window, whatever the address.
	for _, address := range []string{"bob@example.com", "cy@example.com", "bob@example.com"} {
		wantStatus(t, "email change to "+address, e.post(t, "/v1/me/email-change", ada.Token, newEmailBody(address)), http.StatusAccepted)
	}
	for _, address := range []string{"bob@example.com", "dan@example.com"} {
		r := e.post(t, "/v1/me/email-change", ada.Token, newEmailBody(address))
		wantProblem(t, "the 6th email change, to "+address, r, http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	}
}

// TestSignInLink holds POST /v1/sign-in-links to what it promises beyond
// success: it tells nothing of accounts, refuses bad addresses and limits
// each address.
func TestSignInLink(t *testing.T) {
	t.Parallel()
	t.Run("the same answer for any address", testSignInLinkNoEnumeration)
	t.Run("a bad address", testSignInLinkBadEmail)
	t.Run("invisible characters", testSignInLinkInvisibleCharacters)
	t.Run("the limit per address", testSignInLinkPerAddressLimit)
}

// testSignInLinkNoEnumeration: a known and an unknown address get the same
// answer.
func testSignInLinkNoEnumeration(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.signIn(t, "ada@example.com")

	known := e.post(t, "/v1/sign-in-links", "", emailBody("ada@example.com"))
	e.oneMail(t, mail.TopicLoginLink, "ada@example.com", "/sign-in")
	unknown := e.post(t, "/v1/sign-in-links", "", emailBody("nobody@example.com"))
	e.oneMail(t, mail.TopicLoginLink, "nobody@example.com", "/sign-in")

	if known.status != http.StatusAccepted || unknown.status != http.StatusAccepted {
		t.Errorf("known address: %s; unknown address: %s; want 202 for both", known, unknown)
	}
	if string(known.body) != string(unknown.body) || len(known.body) != 0 {
		t.Errorf("bodies differ or are not empty: known %q, unknown %q", known.body, unknown.body)
	}
	for _, h := range []string{"Content-Type", "Content-Length", "Cache-Control", "WWW-Authenticate", "Retry-After"} {
		if known.header.Get(h) != unknown.header.Get(h) {
			t.Errorf("header %s: known %q, unknown %q", h, known.header.Get(h), unknown.header.Get(h))
		}
	}
	if n := e.count(t, `SELECT count(*) FROM users WHERE email = 'nobody@example.com'`); n != 0 {
		t.Errorf("asking for a link for an unknown address made a user")
	}
}

func testSignInLinkBadEmail(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.signIn(t, "ada@example.com")
	before := e.snapshot(t)
	for _, address := range []string{
		"",
		"   ",
		"not-an-email",
		"Ada <ada@example.com>",
		"<ada@example.com>",
		"ada@example.com, bob@example.com",
		"a@b",
		"ada@example.",
		"ada@.example.com",
		"ada@example..com",
		"ada@[127.0.0.1]",
		"a@127.0.0.1", "a@127.1", "a@2130706433", "a@0x7f.0x0.0x0.0x1", "a@[IPv6:::1]", "a@localhost", "a@example.123",
		"ada@exa mple.com",
		"ada (Ada) @example.com",
		"ada@example.com\r\nBcc: eve@example.com",
		"ada\x00@example.com",
		strings.Repeat("a", 65) + "@example.com",
		"ada@" + strings.Repeat("e", 250) + ".com",
	} {
		r := e.post(t, "/v1/sign-in-links", "", emailBody(address))
		wantProblem(t, "POST /v1/sign-in-links "+strconv.QuoteToASCII(address), r, http.StatusBadRequest, httpapi.TypeBadEmail)
	}
	e.unchanged(t, "refused addresses", before)
}

// testSignInLinkInvisibleCharacters: an address with invisible or control
// characters is not a plain address; it would be stored beside, and look
// the same as, the address without them.
func testSignInLinkInvisibleCharacters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := e.snapshot(t)
	for _, address := range []string{
		"ada@example.com\u200b", // zero-width space in the domain
		"ada@example.com\ufeff", // byte-order mark in the domain
		"ada@exam\u00adple.com", // soft hyphen in the domain
		"ada\u0085@example.com", // C1 control (NEL)
		"ada\u202e@example.com", // right-to-left override
	} {
		r := e.post(t, "/v1/sign-in-links", "", emailBody(address))
		wantProblem(t, "POST /v1/sign-in-links "+strconv.QuoteToASCII(address), r, http.StatusBadRequest, httpapi.TypeBadEmail)
	}
	e.unchanged(t, "addresses with invisible characters", before)
}

// testSignInLinkPerAddressLimit: the 6th request for one address within 15
// minutes gets 429 with an honest Retry-After.
func testSignInLinkPerAddressLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i := range 5 {
		e.clock.Set(start.Add(time.Duration(i) * time.Minute))
		e.link(t, "ada@example.com", "ada@example.com")
	}

	e.clock.Set(start.Add(5 * time.Minute))
	for _, spelling := range []string{"ada@example.com", "  ADA@Example.com"} {
		before := e.snapshot(t)
		r := e.post(t, "/v1/sign-in-links", "", emailBody(spelling))
		wantProblem(t, "6th request as "+spelling, r, http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
		if wait := wantRetryAfter(t, "6th request", r); wait != 10*time.Minute {
			t.Errorf("Retry-After %s, want 10m: the first request leaves the window at start+15m", wait)
		}
		e.unchanged(t, "6th request", before)
	}

	// Another address is not limited.
	e.link(t, "bob@example.com", "bob@example.com")

	// Retry-After tells the truth: one second early is still too early, on
	// time is fine.
	e.clock.Set(start.Add(15*time.Minute - time.Second))
	before := e.snapshot(t)
	r := e.post(t, "/v1/sign-in-links", "", emailBody("ada@example.com"))
	wantProblem(t, "a second before the window moves", r, http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	if wait := wantRetryAfter(t, "a second before", r); wait != time.Second {
		t.Errorf("Retry-After %s, want 1s", wait)
	}
	e.unchanged(t, "request a second early", before)
	e.clock.Set(start.Add(15 * time.Minute))
	e.link(t, "ada@example.com", "ada@example.com")
}

// TestCommandsRefuse holds each command to its failure rows of the API
// table: what it refuses, with which problem, changing nothing.
func TestCommandsRefuse(t *testing.T) {
	t.Parallel()
	t.Run("sign-in", testSignInRefusesCodes)
	t.Run("me", testMeRefuses)
	t.Run("sign-out", testSignOutRefuses)
	t.Run("email change", testEmailChangeRefuses)
	t.Run("confirm email change", testConfirmEmailChangeRefuses)
}

func testSignInRefusesCodes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	used := e.link(t, "ada@example.com", "ada@example.com")
	e.signInWith(t, used)
	expired := e.link(t, "bob@example.com", "bob@example.com")
	live := e.link(t, "carol@example.com", "carol@example.com")
	change := func() string {
		s := e.signIn(t, "dave@example.com")
		wantStatus(t, "email change", e.post(t, "/v1/me/email-change", s.Token, newEmailBody("dave2@example.com")), http.StatusAccepted)
		return e.oneMail(t, mail.TopicEmailChange, "dave2@example.com", "/confirm-email")
	}()

	refuse := func(what, code string) {
		t.Helper()
		before := e.snapshot(t)
		r := e.post(t, "/v1/sessions", "", codeBody(code))
		wantProblem(t, "POST /v1/sessions with "+what, r, http.StatusUnauthorized, httpapi.TypeInvalidCode)
		e.unchanged(t, "sign-in with "+what, before)
	}
	refuse("an unknown code", strings.Repeat("a", len(used)))
	refuse("a used code", used)
	refuse("a used code in upper case", strings.ToUpper(used))
	refuse("an email-change code", change)
	for what, code := range map[string]string{
		"an empty code":         "",
		"a short code":          "abc",
		"a code one too long":   live + "a",
		"a code one too short":  live[1:],
		"a non-base32 code":     "1" + live[1:],
		"punctuation":           "!" + live[1:],
		"the link's URL":        baseURL + "/sign-in?code=" + live,
		"a code with a NUL":     live[:10] + "\x00" + live[11:],
		"a huge code":           strings.Repeat("a", 3000),
		"a code in non-ASCII":   strings.Repeat("é", 16),
		"a code with inner tab": live[:16] + "\t" + live[16:],
	} {
		refuse(what, code)
	}

	e.clock.Set(start.Add(linkTTL))
	refuse("an expired code", expired)

	// A code refused for its shape does not spoil the real one.
	e.clock.Set(start.Add(linkTTL - time.Second))
	s := e.signInWith(t, live)
	if s.User.Email != "carol@example.com" {
		t.Errorf("signed in as %q", s.User.Email)
	}
}

func testMeRefuses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.signIn(t, "ada@example.com")
	ended := e.signIn(t, "ada@example.com")
	wantStatus(t, "sign-out", e.send(t, request{method: http.MethodDelete, path: "/v1/sessions/current", token: ended.Token}), http.StatusNoContent)

	before := e.snapshot(t)
	for what, auth := range map[string]string{
		"no token":                "",
		"Basic auth":              "Basic " + s.Token,
		"scheme only":             "Bearer",
		"scheme and a space":      "Bearer ",
		"token without scheme":    s.Token,
		"two tokens":              "Bearer " + s.Token + " " + s.Token,
		"a truncated token":       "Bearer " + s.Token[1:],
		"an unknown token":        "Bearer " + strings.Repeat("a", len(s.Token)),
		"the token of a sign-out": "Bearer " + ended.Token,
	} {
		req := request{method: http.MethodGet, path: "/v1/me"}
		if auth != "" {
			req.header = map[string]string{"Authorization": auth}
		}
		wantUnauthenticated(t, "GET /v1/me with "+what, e.send(t, req))
	}
	e.unchanged(t, "refused GET /v1/me", before)

	// The live session works until it expires.
	e.clock.Set(start.Add(sessionTTL - time.Second))
	e.me(t, s.Token)
	e.clock.Set(start.Add(sessionTTL))
	wantUnauthenticated(t, "GET /v1/me with an expired session", e.get(t, "/v1/me", s.Token))
	e.unchanged(t, "refused GET /v1/me", before)
}

func testSignOutRefuses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.signIn(t, "ada@example.com")
	expiring := e.signIn(t, "bob@example.com")

	before := e.snapshot(t)
	signOut := func(what string, header map[string]string) {
		t.Helper()
		r := e.send(t, request{method: http.MethodDelete, path: "/v1/sessions/current", header: header})
		wantUnauthenticated(t, "DELETE /v1/sessions/current with "+what, r)
	}
	signOut("no token", nil)
	signOut("Basic auth", map[string]string{"Authorization": "Basic " + s.Token})
	signOut("an unknown token", map[string]string{"Authorization": "Bearer " + strings.Repeat("b", len(s.Token))})
	signOut("a malformed token", map[string]string{"Authorization": "Bearer not-a-token"})
	e.unchanged(t, "refused sign-outs", before)
	e.me(t, s.Token)

	wantStatus(t, "sign-out", e.send(t, request{method: http.MethodDelete, path: "/v1/sessions/current", token: s.Token}), http.StatusNoContent)
	before = e.snapshot(t)
	signOut("a token already signed out", map[string]string{"Authorization": "Bearer " + s.Token})
	e.clock.Set(start.Add(sessionTTL))
	signOut("an expired session", map[string]string{"Authorization": "Bearer " + expiring.Token})
	e.unchanged(t, "refused sign-outs", before)
}

func testEmailChangeRefuses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ada := e.signIn(t, "ada@example.com")
	e.signIn(t, "bob@example.com")
	before := e.snapshot(t)

	for _, address := range []string{"", "not-an-email", "Bob <bob@example.com>", "a@b", "ada@example..com", "a@127.0.0.1", "a@localhost", strings.Repeat("a", 65) + "@example.com"} {
		r := e.post(t, "/v1/me/email-change", ada.Token, newEmailBody(address))
		wantProblem(t, "email change to "+jsonString(address), r, http.StatusBadRequest, httpapi.TypeBadEmail)
	}

	for what, token := range map[string]string{
		"no token":         "",
		"an unknown token": strings.Repeat("c", len(ada.Token)),
		"a malformed one":  "nope",
	} {
		r := e.post(t, "/v1/me/email-change", token, newEmailBody("new@example.com"))
		wantUnauthenticated(t, "email change with "+what, r)
	}

	for what, address := range map[string]string{
		"one's own address":        "ada@example.com",
		"one's own, in upper case": "ADA@EXAMPLE.COM",
	} {
		r := e.post(t, "/v1/me/email-change", ada.Token, newEmailBody(address))
		wantProblem(t, "email change to "+what, r, http.StatusConflict, httpapi.TypeEmailTaken)
	}
	e.unchanged(t, "refused email changes", before)
	if ms := e.mails(t); len(ms) != 0 {
		t.Errorf("refused email changes sent %d mails", len(ms))
	}

	// After sign-out the token cannot ask any more.
	wantStatus(t, "sign-out", e.send(t, request{method: http.MethodDelete, path: "/v1/sessions/current", token: ada.Token}), http.StatusNoContent)
	before = e.snapshot(t)
	wantUnauthenticated(t, "email change after sign-out", e.post(t, "/v1/me/email-change", ada.Token, newEmailBody("new@example.com")))
	e.unchanged(t, "email change after sign-out", before)
}

func testConfirmEmailChangeRefuses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ada := e.signIn(t, "ada@example.com")
	ask := func(token, to string) string {
		t.Helper()
		wantStatus(t, "email change to "+to, e.post(t, "/v1/me/email-change", token, newEmailBody(to)), http.StatusAccepted)
		return e.oneMail(t, mail.TopicEmailChange, to, "/confirm-email")
	}
	refuse := func(what, code string, status int, typ string) {
		t.Helper()
		before := e.snapshot(t)
		r := e.post(t, "/v1/email-changes", "", codeBody(code))
		wantProblem(t, "confirm with "+what, r, status, typ)
		e.unchanged(t, "confirm with "+what, before)
	}

	used := ask(ada.Token, "ada2@example.com")
	wantStatus(t, "confirm", e.post(t, "/v1/email-changes", ada.Token, codeBody(used)), http.StatusOK)
	e.oneMail(t, mail.TopicEmailChanged, "ada@example.com", "/undo-email")
	signInCode := e.link(t, "zed@example.com", "zed@example.com")

	refuse("an unknown code", strings.Repeat("a", len(used)), http.StatusBadRequest, httpapi.TypeInvalidCode)
	refuse("a used code", used, http.StatusBadRequest, httpapi.TypeInvalidCode)
	refuse("a sign-in code", signInCode, http.StatusBadRequest, httpapi.TypeInvalidCode)
	refuse("an empty code", "", http.StatusBadRequest, httpapi.TypeInvalidCode)
	refuse("a malformed code", "abc!", http.StatusBadRequest, httpapi.TypeInvalidCode)
	refuse("a huge code", strings.Repeat("z", 3000), http.StatusBadRequest, httpapi.TypeInvalidCode)

	e.clock.Set(start.Add(time.Hour))
	expired := ask(ada.Token, "ada3@example.com")
	e.clock.Set(start.Add(time.Hour + linkTTL))
	refuse("an expired code", expired, http.StatusBadRequest, httpapi.TypeInvalidCode)

	// Someone else takes the address between the request and the
	// confirmation.
	e.clock.Set(start.Add(2 * time.Hour))
	taken := ask(ada.Token, "carol@example.com")
	carol := e.signIn(t, "carol@example.com")
	refuse("an address taken meanwhile", taken, http.StatusConflict, httpapi.TypeEmailTaken)
	if got := e.me(t, ada.Token).Email; got != "ada2@example.com" {
		t.Errorf("ada's address is %q after the refused change, want ada2@example.com", got)
	}
	if got := e.me(t, carol.Token).Email; got != "carol@example.com" {
		t.Errorf("carol's address is %q", got)
	}
	// Two users with pending changes to one address: the first to confirm
	// wins, the other gets 409.
	pending := ask(ada.Token, "shared@example.com")
	dave := e.signIn(t, "dave@example.com")
	daves := ask(dave.Token, "shared@example.com")
	wantStatus(t, "dave confirms first", e.post(t, "/v1/email-changes", dave.Token, codeBody(daves)), http.StatusOK)
	e.oneMail(t, mail.TopicEmailChanged, "dave@example.com", "/undo-email")
	refuse("a pending change to an address confirmed by another", pending, http.StatusConflict, httpapi.TypeEmailTaken)
}

// TestFakeSuccessBodies checks the shapes of the success answers with the
// fake domain, where every field is known.
func TestFakeSuccessBodies(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}})
	r := serve(t, h, "POST", "/v1/sessions", "", nil, []byte(codeBody(strings.Repeat("a", 32))))
	wantStatus(t, "sign-in", r, http.StatusCreated)
	var s session
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("201 body %s: %v", r.body, err)
	}
	if s.Token != fakeToken || !s.ExpiresAt.Equal(start.Add(sessionTTL)) || s.User.ID != fakeUser.ID || s.User.Email != fakeUser.Email {
		t.Errorf("201 body %s", r.body)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("a session token is sent with Cache-Control %q, want no-store", cc)
	}
}
