package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// browser is a client of the pages as a browser is one: it keeps the
// cookies it is given, says that its forms come from the page's own origin
// (Sec-Fetch-Site), and does not follow redirects, so that each answer can
// be checked.
type browser struct {
	url     string
	client  *http.Client
	cookies map[string]*http.Cookie
}

func newBrowser(url string) *browser {
	return &browser{url: url, cookies: map[string]*http.Cookie{}, client: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// page is what the browser was answered.
type page struct {
	response
	cookies []*http.Cookie
}

func (b *browser) do(t *testing.T, method, path string, form url.Values, header map[string]string) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := page{response: response{status: res.StatusCode, header: res.Header, body: raw}, cookies: res.Cookies()}
	checkContract(t, method, path, nil, p.response)
	for _, c := range p.cookies {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	if !strings.HasPrefix(path, "/assets/") && p.status != http.StatusSeeOther {
		if ct := p.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("%s %s: Content-Type %q, want HTML", method, path, ct)
		}
		// Search engines and Lighthouse read a page's description.
		if !strings.Contains(string(p.body), `<meta name="description" content="`) {
			t.Errorf("%s %s: the page has no meta description", method, path)
		}
	}
	return p
}

func (b *browser) get(t *testing.T, path string) page {
	t.Helper()
	return b.do(t, http.MethodGet, path, nil, nil)
}

func (b *browser) submit(t *testing.T, path string, form url.Values) page {
	t.Helper()
	return b.do(t, http.MethodPost, path, form, nil)
}

// wantPage checks p's status and that its body holds each of want.
func wantPage(t *testing.T, what string, p page, status int, want ...string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("%s: status %d, want %d\n%s", what, p.status, status, p.body)
	}
	for _, w := range want {
		if !strings.Contains(string(p.body), w) {
			t.Errorf("%s: the page lacks %q:\n%s", what, w, p.body)
		}
	}
}

// wantNoForm checks that p, the page of a code that no longer works, has
// no form and does not hold the code.
func wantNoForm(t *testing.T, what string, p page, code string) {
	t.Helper()
	for _, bad := range []string{"<form", "<button", code} {
		if strings.Contains(string(p.body), bad) {
			t.Errorf("%s: the page holds %q:\n%s", what, bad, p.body)
		}
	}
}

// shown is an address as the pages show it, with a place to break the line
// after the @ and before each dot.
func shown(email string) string {
	return strings.NewReplacer("@", "@<wbr>", ".", "<wbr>.").Replace(email)
}

// wantRedirect checks that p sends the browser to location.
func wantRedirect(t *testing.T, what string, p page, location string) {
	t.Helper()
	if p.status != http.StatusSeeOther || p.header.Get("Location") != location {
		t.Fatalf("%s: %d to %q, want 303 to %q\n%s", what, p.status, p.header.Get("Location"), location, p.body)
	}
}

// unavailableUsers is a user domain whose database is gone.
type unavailableUsers struct{ fakeUsers }

func (unavailableUsers) RequestSignInLink(context.Context, string) error { return uow.ErrUnavailable }
func (unavailableUsers) SignIn(context.Context, string) (user.Session, error) {
	return user.Session{}, uow.ErrUnavailable
}
func (unavailableUsers) Me(context.Context, string) (user.User, error) {
	return user.User{}, uow.ErrUnavailable
}
func (unavailableUsers) SignOut(context.Context, string) error       { return uow.ErrUnavailable }
func (unavailableUsers) DeleteAccount(context.Context, string) error { return uow.ErrUnavailable }
func (unavailableUsers) SignInAddress(context.Context, string) (string, error) {
	return "", uow.ErrUnavailable
}

// countingUsers counts the commands that would use a code.
type countingUsers struct {
	fakeUsers
	used *atomic.Int32
}

func (c countingUsers) SignIn(ctx context.Context, code string) (user.Session, error) {
	c.used.Add(1)
	return c.fakeUsers.SignIn(ctx, code)
}

func (c countingUsers) ConfirmEmailChange(ctx context.Context, code, token string) (user.User, error) {
	c.used.Add(1)
	return c.fakeUsers.ConfirmEmailChange(ctx, code, token)
}

// TestPages holds the browser pages to what docs/api.md says of them.
func TestPages(t *testing.T) {
	t.Parallel()
	t.Run("walk through sign-in, change of address and sign-out", testPagesWalkThroughSignInChangeOfAddressAndSignOut)
	t.Run("delete the account", testPagesDeleteTheAccount)
	t.Run("send an ended session to sign-in", testPagesSendAnEndedSessionToSignIn)
	t.Run("end other sessions", testPagesEndOtherSessions)
	t.Run("undo a change of address", testPagesUndoAChangeOfAddress)
	t.Run("refuse forms from other sites", testPagesRefuseFormsFromOtherSites)
	t.Run("show the form again with the problem", testPagesShowTheFormAgainWithTheProblem)
	t.Run("answer an outage with 503", testPagesAnswerAnOutageWith503)
	t.Run("answer browsers in HTML", testPagesAnswerBrowsersInHTML)
	t.Run("cookie under HTTPS", testPagesCookieUnderHTTPS)
	t.Run("refuse a malformed query", testPagesRefuseAMalformedQuery)
	t.Run("strict and escaped", testPagesAreStrictAndEscaped)
	t.Run("share the client limit", testPagesShareTheClientLimit)
}

// testPagesWalkThroughSignInChangeOfAddressAndSignOut walks a person
// through the pages alone, on the real service: ask for a link on /, open
// it, sign in, see the account, change the address from its link, sign
// out. The cookie holds the API's own session, which the API takes only as
// a bearer token.
func testPagesWalkThroughSignInChangeOfAddressAndSignOut(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := newBrowser(e.url)

	wantPage(t, "GET /", b.get(t, "/"), http.StatusOK, `<form method="post" action="/">`, `<label for="email">`)
	wantPage(t, "POST /", b.submit(t, "/", url.Values{"email": {"Ada@Example.com"}}), http.StatusOK,
		"Check your inbox", shown("Ada@Example.com"), `<form method="post" action="/sign-in">`)
	code := e.oneMail(t, mail.TopicLoginLink, "ada@example.com", "/sign-in")

	// Opening the link, as often as a scanner likes, uses nothing up.
	before := e.snapshot(t)
	for range 3 {
		wantPage(t, "GET /sign-in", b.get(t, "/sign-in?code="+code), http.StatusOK,
			`<form method="post" action="/sign-in">`, `value="`+code+`"`, `<strong id="who">`+shown("ada@example.com")+`</strong>`)
	}
	e.unchanged(t, "opening the sign-in link", before)

	signedIn := b.submit(t, "/sign-in", url.Values{"code": {code}})
	wantRedirect(t, "POST /sign-in", signedIn, "/account")
	cookie := b.cookies["session"]
	if cookie == nil {
		t.Fatalf("POST /sign-in set no session cookie: %v", signedIn.cookies)
	}
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Secure || cookie.Path != "/" {
		t.Errorf("session cookie %s, want HttpOnly, SameSite=Lax, Path=/ and (over http) not Secure", cookie)
	}
	if want := int(sessionTTL / time.Second); cookie.MaxAge != want {
		t.Errorf("session cookie Max-Age %d, want the session's %d", cookie.MaxAge, want)
	}
	// The cookie's session is the API's: its token is a bearer token...
	if who := e.me(t, cookie.Value); who.Email != "ada@example.com" {
		t.Fatalf("GET /v1/me with the cookie's token: %+v", who)
	}
	// ...but the API does not take the cookie itself.
	r := e.send(t, request{method: "GET", path: "/v1/me", header: map[string]string{"Cookie": cookie.String()}})
	wantUnauthenticated(t, "GET /v1/me with the cookie alone", r)
	usedAgain := b.submit(t, "/sign-in", url.Values{"code": {code}})
	wantPage(t, "POST /sign-in with the used code", usedAgain,
		http.StatusBadRequest, "unknown, used or expired", `<a class="action" href="/">Ask for a new sign-in link</a>`)
	wantNoForm(t, "POST /sign-in with the used code", usedAgain, code)

	wantPage(t, "GET /account", b.get(t, "/account"), http.StatusOK,
		`<dd id="current-email">`+shown("ada@example.com")+`</dd>`, `action="/account/email"`, `action="/sign-out"`)
	// A link to another account, such as one someone else sent, says whose
	// it is and whom the browser is signed in as.
	other := e.link(t, "mallory@example.com", "mallory@example.com")
	wantPage(t, "GET /sign-in of another account's link", b.get(t, "/sign-in?code="+other), http.StatusOK,
		`<strong id="who">`+shown("mallory@example.com")+`</strong>`, "You are signed in as "+shown("ada@example.com")+" in this browser.")

	wantRedirect(t, "POST /account/email", b.submit(t, "/account/email", url.Values{"new_email": {"grace@example.com"}}),
		"/account?notice=email-sent")
	wantPage(t, "GET /account after asking", b.get(t, "/account?notice=email-sent"), http.StatusOK,
		"We sent a confirmation link to your new address", shown("ada@example.com"))
	change := e.oneMail(t, mail.TopicEmailChange, "grace@example.com", "/confirm-email")
	wantPage(t, "GET /confirm-email", b.get(t, "/confirm-email?code="+change), http.StatusOK, `action="/confirm-email"`,
		`<strong id="from">`+shown("ada@example.com")+`</strong> to <strong id="to">`+shown("grace@example.com")+`</strong>`)
	wantRedirect(t, "POST /confirm-email", b.submit(t, "/confirm-email", url.Values{"code": {change}}),
		"/account?notice=email-changed")
	wantPage(t, "GET /account after the change", b.get(t, "/account?notice=email-changed"), http.StatusOK,
		"Your email address has been changed.", `<dd id="current-email">`+shown("grace@example.com")+`</dd>`)

	signedOut := b.submit(t, "/sign-out", nil)
	wantRedirect(t, "POST /sign-out", signedOut, "/?notice=signed-out")
	if len(signedOut.cookies) != 1 || signedOut.cookies[0].Name != "session" || signedOut.cookies[0].MaxAge >= 0 {
		t.Errorf("POST /sign-out set %v, want the session cookie cleared", signedOut.cookies)
	}
	wantPage(t, "GET / after signing out", b.get(t, "/?notice=signed-out"), http.StatusOK, "You have signed out.")
	// A used link's page says so and leads to a new link; it offers no
	// button that would send the dead code.
	used := b.get(t, "/sign-in?code="+code)
	wantPage(t, "GET /sign-in of a used link", used, http.StatusBadRequest,
		"This link is unknown, used or expired.", `<a class="action" href="/">Ask for a new sign-in link</a>`)
	wantNoForm(t, "GET /sign-in of a used link", used, code)
	used = b.get(t, "/confirm-email?code="+change)
	wantPage(t, "GET /confirm-email of a used link", used, http.StatusBadRequest,
		"This link is unknown, used or expired.", `<a class="action" href="/account">Ask for a new confirmation link on your account page</a>`)
	wantNoForm(t, "GET /confirm-email of a used link", used, change)
	wantUnauthenticated(t, "GET /v1/me after signing out", e.get(t, "/v1/me", cookie.Value))
	wantRedirect(t, "GET /account after signing out", b.get(t, "/account"), "/")
}

// testPagesDeleteTheAccount: the account page's deletion needs its box
// ticked, and then erases the account, clears the cookie and says so.
func testPagesDeleteTheAccount(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := newBrowser(e.url)
	b.submit(t, "/", url.Values{"email": {"ada@example.com"}})
	wantRedirect(t, "POST /sign-in", b.submit(t, "/sign-in", url.Values{"code": {e.oneMail(t, mail.TopicLoginLink, "ada@example.com", "/sign-in")}}), "/account")
	token := b.cookies["session"].Value
	wantPage(t, "GET /account", b.get(t, "/account"), http.StatusOK,
		`action="/account/delete"`, `<input id="confirm-delete" name="confirm" type="checkbox" value="yes" required`)

	before := e.snapshot(t)
	wantPage(t, "POST /account/delete without the box", b.submit(t, "/account/delete", url.Values{}), http.StatusBadRequest,
		"Tick the box to say that you mean to delete your account.", `id="confirm-delete"`, `aria-invalid="true"`)
	e.unchanged(t, "a deletion without the box", before)
	if who := e.me(t, token); who.Email != "ada@example.com" {
		t.Fatalf("Me after a refused deletion: %+v", who)
	}

	deleted := b.submit(t, "/account/delete", url.Values{"confirm": {"yes"}})
	wantRedirect(t, "POST /account/delete", deleted, "/?notice=deleted")
	if len(deleted.cookies) != 1 || deleted.cookies[0].Name != "session" || deleted.cookies[0].MaxAge >= 0 {
		t.Errorf("POST /account/delete set %v, want the session cookie cleared", deleted.cookies)
	}
	wantPage(t, "GET / after the deletion", b.get(t, "/?notice=deleted"), http.StatusOK, "Your account is deleted")
	wantUnauthenticated(t, "GET /v1/me after the deletion", e.get(t, "/v1/me", token))
	if n := e.count(t, `SELECT count(*) FROM users`); n != 0 {
		t.Errorf("%d users after the only one was deleted", n)
	}
}

// testPagesSendAnEndedSessionToSignIn: a cookie whose session has ended or
// expired is cleared, and the browser is sent to sign in again.
func testPagesSendAnEndedSessionToSignIn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.signIn(t, "ada@example.com")
	b := newBrowser(e.url)
	b.cookies["session"] = &http.Cookie{Name: "session", Value: s.Token}
	wantPage(t, "GET /account", b.get(t, "/account"), http.StatusOK, shown("ada@example.com"))

	e.clock.Set(start.Add(sessionTTL))
	for _, visit := range []func() page{
		func() page { return b.get(t, "/account") },
		func() page { return b.submit(t, "/account/email", url.Values{"new_email": {"grace@example.com"}}) },
	} {
		b.cookies["session"] = &http.Cookie{Name: "session", Value: s.Token}
		p := visit()
		wantRedirect(t, "the expired session", p, "/?notice=session-ended")
		if len(p.cookies) != 1 || p.cookies[0].MaxAge >= 0 {
			t.Errorf("the expired session's cookie is not cleared: %v", p.cookies)
		}
	}
	if ms := e.mails(t); len(ms) != 0 {
		t.Errorf("an expired session asked for a change of address: %+v", ms)
	}
	wantPage(t, "GET /?notice=session-ended", b.get(t, "/?notice=session-ended"), http.StatusOK, "Your session has ended.")
}

// testPagesEndOtherSessions: the account page lists where the account is
// signed in, this browser marked, with a form that ends each other session
// and one that signs out everywhere else, which work without a script;
// each end shows in the activity, and ending this browser's own session
// signs it out. An ID of no live session of the account ends nothing.
func testPagesEndOtherSessions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	caughtUp := runActivity(t, e)
	laptop := e.signInAs(t, "ada@example.com", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0")
	phone := e.signInAs(t, "ada@example.com", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
	script := e.signInAs(t, "ada@example.com", "curl/8.5.0")
	bob := e.signIn(t, "bob@example.com")
	ids := map[string]string{}
	for _, s := range e.sessions(t, laptop.Token).Sessions {
		ids[s.Client] = s.ID.String()
	}
	b := newBrowser(e.url)
	b.cookies["session"] = &http.Cookie{Name: "session", Value: laptop.Token}
	endForm := `<form method="post" action="/account/sessions/end">`
	othersForm := `<form method="post" action="/account/sessions/end-others">`
	hidden := func(id string) string { return `<input type="hidden" name="id" value="` + id + `">` }

	account := b.get(t, "/account")
	wantPage(t, "GET /account", account, http.StatusOK, "Firefox on Linux <strong>(this browser)</strong>", endForm,
		hidden(ids["Safari on iOS"]), hidden(ids["curl"]), othersForm, "Sign out everywhere else")
	if strings.Contains(string(account.body), hidden(ids["Firefox on Linux"])) {
		t.Errorf("the account page offers a form that ends this browser's own session:\n%s", account.body)
	}

	before := e.snapshot(t)
	for what, id := range map[string]string{
		"another account's session": e.sessions(t, bob.Token).Sessions[0].ID.String(),
		"an unknown ID":             uuid.NewString(),
		"a malformed ID":            "not-an-id",
	} {
		wantPage(t, "POST /account/sessions/end of "+what, b.submit(t, "/account/sessions/end", url.Values{"id": {id}}),
			http.StatusNotFound, `<a href="/account">`)
	}
	e.unchanged(t, "refused ends", before)

	wantRedirect(t, "POST /account/sessions/end of the phone", b.submit(t, "/account/sessions/end", url.Values{"id": {ids["Safari on iOS"]}}),
		"/account?notice=session-ended-elsewhere")
	wantUnauthenticated(t, "the phone after its end", e.get(t, "/v1/me", phone.Token))
	e.me(t, script.Token)
	caughtUp()
	ended := b.get(t, "/account?notice=session-ended-elsewhere")
	wantPage(t, "GET /account after ending the phone", ended, http.StatusOK,
		"That session has ended.", hidden(ids["curl"]), othersForm, "A session was ended from another")
	if strings.Contains(string(ended.body), "Safari on iOS") {
		t.Errorf("the account page still lists the ended session:\n%s", ended.body)
	}

	wantRedirect(t, "POST /account/sessions/end-others", b.submit(t, "/account/sessions/end-others", url.Values{}),
		"/account?notice=sessions-ended")
	wantUnauthenticated(t, "the script after signing out everywhere else", e.get(t, "/v1/me", script.Token))
	e.me(t, laptop.Token)
	e.me(t, bob.Token)
	alone := b.get(t, "/account?notice=sessions-ended")
	wantPage(t, "GET /account after signing out everywhere else", alone, http.StatusOK,
		"Every other session has ended.", "Firefox on Linux <strong>(this browser)</strong>")
	for _, gone := range []string{endForm, othersForm, "curl"} {
		if strings.Contains(string(alone.body), gone) {
			t.Errorf("with one session left the account page holds %q:\n%s", gone, alone.body)
		}
	}

	own := b.submit(t, "/account/sessions/end", url.Values{"id": {ids["Firefox on Linux"]}})
	wantRedirect(t, "POST /account/sessions/end of this browser's own", own, "/?notice=signed-out")
	if len(own.cookies) != 1 || own.cookies[0].Name != "session" || own.cookies[0].MaxAge >= 0 {
		t.Errorf("ending this browser's own session set %v, want the session cookie cleared", own.cookies)
	}
	wantUnauthenticated(t, "the laptop after ending its own session", e.get(t, "/v1/me", laptop.Token))
}

// testPagesUndoAChangeOfAddress: the link of the notice that a confirmed
// change mails to the address the account left opens a page that names
// that address, and uses nothing up; its button, without a script, moves
// the account back, ends every session, this browser's too, and says so.
// A used link says so and offers no form; an address that another account
// took meanwhile is said and changes nothing.
func testPagesUndoAChangeOfAddress(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// change moves the account of token to the address to, and returns
	// the code that the notice to the address it left carries.
	change := func(token, from, to string) string {
		t.Helper()
		wantStatus(t, "POST /v1/me/email-change", e.post(t, "/v1/me/email-change", token, newEmailBody(to)), http.StatusAccepted)
		code := e.oneMail(t, mail.TopicEmailChange, to, "/confirm-email")
		wantStatus(t, "POST /v1/email-changes", e.post(t, "/v1/email-changes", token, codeBody(code)), http.StatusOK)
		return e.oneMail(t, mail.TopicEmailChanged, from, "/undo-email")
	}
	ada := e.signIn(t, "ada@example.com")
	undo := change(ada.Token, "ada@example.com", "mallory@example.net")
	b := newBrowser(e.url)
	b.cookies["session"] = &http.Cookie{Name: "session", Value: ada.Token}

	before := e.snapshot(t)
	for range 2 {
		wantPage(t, "GET /undo-email", b.get(t, "/undo-email?code="+undo), http.StatusOK,
			`<form method="post" action="/undo-email">`, `value="`+undo+`"`, `<strong id="undo-to">`+shown("ada@example.com")+`</strong>`)
	}
	e.unchanged(t, "opening the undo link", before)

	undone := b.submit(t, "/undo-email", url.Values{"code": {undo}})
	wantRedirect(t, "POST /undo-email", undone, "/?notice=email-restored")
	if len(undone.cookies) != 1 || undone.cookies[0].Name != "session" || undone.cookies[0].MaxAge >= 0 {
		t.Errorf("POST /undo-email set %v, want the session cookie cleared", undone.cookies)
	}
	wantPage(t, "GET / after the undo", b.get(t, "/?notice=email-restored"), http.StatusOK, "The change of address is undone")
	wantUnauthenticated(t, "the session after the undo", e.get(t, "/v1/me", ada.Token))
	again := e.signIn(t, "ada@example.com")
	if again.User.ID != ada.User.ID {
		t.Errorf("ada@example.com signs in to %s after the undo, want her account %s", again.User.ID, ada.User.ID)
	}
	used := b.get(t, "/undo-email?code="+undo)
	wantPage(t, "GET /undo-email of a used link", used, http.StatusBadRequest,
		"This link is unknown, used or expired.", `<a class="action" href="/">Go to the start</a>`)
	wantNoForm(t, "GET /undo-email of a used link", used, undo)

	// Another account takes the address the account left: the undo says
	// so, and changes nothing.
	undo = change(again.Token, "ada@example.com", "ada@example.org")
	e.signIn(t, "ada@example.com")
	before = e.snapshot(t)
	wantPage(t, "POST /undo-email of an address taken since", b.submit(t, "/undo-email", url.Values{"code": {undo}}),
		http.StatusConflict, "Another account holds that address now, so the change cannot be undone. Nothing was changed.")
	e.unchanged(t, "an undo of an address taken since", before)
	if got := e.me(t, again.Token).Email; got != "ada@example.org" {
		t.Errorf("after a refused undo the account is at %q, want ada@example.org", got)
	}
}

// testPagesRefuseFormsFromOtherSites: a form posted from another site,
// as a browser says by Sec-Fetch-Site or, without it, by Origin, is
// refused with 403 and changes nothing, the sign-in included (a forged one
// would put the victim into the forger's account).
func testPagesRefuseFormsFromOtherSites(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.signIn(t, "ada@example.com")
	code := e.link(t, "ada@example.com", "ada@example.com")
	b := newBrowser(e.url)
	b.cookies["session"] = &http.Cookie{Name: "session", Value: s.Token}
	before := e.snapshot(t)
	forms := map[string]url.Values{
		"/":              {"email": {"grace@example.com"}},
		"/sign-in":       {"code": {code}},
		"/confirm-email": {"code": {code}},
		"/account/email": {"new_email": {"grace@example.com"}},
		"/sign-out":      {},
		// The forms that end sessions, which a forged one would end
		// for the victim, and the undo of a change.
		"/account/sessions/end":        {"id": {uuid.NewString()}},
		"/account/sessions/end-others": {},
		"/undo-email":                  {"code": {code}},
		"/account/delete":              {"confirm": {"yes"}},
	}
	for path, form := range forms {
		for _, from := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
			{"Sec-Fetch-Site": "", "Origin": "https://evil.example"},
		} {
			p := b.do(t, http.MethodPost, path, form, from)
			wantPage(t, fmt.Sprintf("POST %s with %v", path, from), p, http.StatusForbidden, "This form came from another site")
		}
	}
	e.unchanged(t, "forms from other sites", before)
	if ms := e.mails(t); len(ms) != 0 {
		t.Errorf("forms from other sites sent mail: %+v", ms)
	}
	e.me(t, s.Token)
}

// testPagesShowTheFormAgainWithTheProblem: bad input, a used code, a taken
// address or too many requests show the form again with what was typed
// and the problem said, with the status the API would give.
func testPagesShowTheFormAgainWithTheProblem(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, Now: func() time.Time { return start }}))
	t.Cleanup(srv.Close)
	b := newBrowser(srv.URL)
	b.cookies["session"] = &http.Cookie{Name: "session", Value: fakeToken}

	p := b.submit(t, "/", url.Values{"email": {"not-an-address"}})
	wantPage(t, "POST / with a bad address", p, http.StatusBadRequest,
		"That is not an email address.", `value="not-an-address"`, `aria-invalid="true" aria-describedby="error"`)
	p = b.submit(t, "/", url.Values{"email": {"limited@example.com"}})
	wantPage(t, "POST / too often", p, http.StatusTooManyRequests, "Too many requests", `value="limited@example.com"`)
	if p.header.Get("Retry-After") != "91" {
		t.Errorf("POST / too often: Retry-After %q, want 91", p.header.Get("Retry-After"))
	}
	wantPage(t, "POST /sign-in with a bad code", b.submit(t, "/sign-in", url.Values{"code": {"nope"}}), http.StatusBadRequest,
		"This link is unknown, used or expired.", `<a class="action" href="/">Ask for a new sign-in link</a>`)
	wantPage(t, "POST /confirm-email taken meanwhile", b.submit(t, "/confirm-email", url.Values{"code": {"taken" + strings.Repeat("a", 27)}}),
		http.StatusConflict, "That address belongs to an account already.")
	wantPage(t, "POST /account/email with one's own address", b.submit(t, "/account/email", url.Values{"new_email": {"Ada@example.com"}}),
		http.StatusConflict, "That is your address already.", `value="Ada@example.com"`, shown("ada@example.com"))
	wantPage(t, "POST / with JSON", b.do(t, http.MethodPost, "/", nil, map[string]string{"Content-Type": "application/json"}),
		http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded")
	big := url.Values{"email": {strings.Repeat("a", 5000) + "@example.com"}}
	wantPage(t, "POST / too large", b.submit(t, "/", big), http.StatusRequestEntityTooLarge, "too large")
}

// testPagesAnswerAnOutageWith503: while the database is gone a page says
// so with 503 and Retry-After, and a form is shown again as it was sent, so
// pressing its button again retries.
func testPagesAnswerAnOutageWith503(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(httpapi.NewServer(httpapi.Deps{Users: unavailableUsers{}}))
	t.Cleanup(srv.Close)
	b := newBrowser(srv.URL)
	for what, p := range map[string]page{
		"POST /":        b.submit(t, "/", url.Values{"email": {"ada@example.com"}}),
		"POST /sign-in": b.submit(t, "/sign-in", url.Values{"code": {"abc"}}),
	} {
		wantPage(t, what, p, http.StatusServiceUnavailable, "The service is unavailable.", `value="`)
		if p.header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", what)
		}
	}
	wantPage(t, "GET /sign-in?code=", b.get(t, "/sign-in?code="+strings.Repeat("a", 32)), http.StatusServiceUnavailable,
		"The service is unavailable.", `value="`+strings.Repeat("a", 32)+`"`)
	for what, p := range map[string]func() page{
		"GET /account":        func() page { return b.get(t, "/account") },
		"POST /account/email": func() page { return b.submit(t, "/account/email", url.Values{"new_email": {"grace@example.com"}}) },
	} {
		b.cookies["session"] = &http.Cookie{Name: "session", Value: fakeToken}
		wantPage(t, what, p(), http.StatusServiceUnavailable, "The service is unavailable.", `<a href="/account">Try again</a>`)
	}
	// Signing out on a shared computer signs this browser out, whatever
	// the service can do.
	b.cookies["session"] = &http.Cookie{Name: "session", Value: fakeToken}
	p := b.submit(t, "/sign-out", url.Values{})
	wantPage(t, "POST /sign-out", p, http.StatusServiceUnavailable, "This browser is signed out")
	if b.cookies["session"] != nil {
		t.Errorf("POST /sign-out in an outage left the session cookie: %v", p.cookies)
	}
}

// testPagesAnswerBrowsersInHTML: a browser that asks for a page that does
// not exist, or uses a page with the wrong method, gets a page; an API
// client still gets a problem.
func testPagesAnswerBrowsersInHTML(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}})
	browser := map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/acount", http.StatusNotFound},
		{"GET", "/account/", http.StatusNotFound},
		{"GET", "/sign-out", http.StatusMethodNotAllowed},
		{"GET", "/account/email", http.StatusMethodNotAllowed},
		{"PUT", "/account", http.StatusMethodNotAllowed},
		{"OPTIONS", "/", http.StatusMethodNotAllowed},
	} {
		r := serve(t, h, c.method, c.path, "", browser, nil)
		if r.status != c.status || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Errorf("%s %s from a browser: %d %s, want %d HTML", c.method, c.path, r.status, r.header.Get("Content-Type"), c.status)
		}
	}
	wantProblem(t, "GET /v1/nope from a browser", serve(t, h, "GET", "/v1/nope", "", browser, nil), http.StatusNotFound, httpapi.TypeNotFound)
	wantProblem(t, "GET /acount from a client", serve(t, h, "GET", "/acount", "", nil, nil), http.StatusNotFound, httpapi.TypeNotFound)
}

// testPagesCookieUnderHTTPS: under an https BASE_URL the session cookie is
// Secure and named __Host-session, and a form whose Origin is BASE_URL's is
// taken behind a proxy that rewrites Host.
func testPagesCookieUnderHTTPS(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, BaseURL: "https://accounts.example", Now: func() time.Time { return start }})
	code := strings.Repeat("a", 32)
	r := serve(t, h, "POST", "/sign-in", "", map[string]string{
		"Content-Type": "application/x-www-form-urlencoded",
		"Origin":       "https://accounts.example", // The proxy forwards to the app's own host name.
	}, []byte("code="+code))
	if r.status != http.StatusSeeOther {
		t.Fatalf("POST /sign-in from BASE_URL's origin: %s", r)
	}
	c := (&http.Response{Header: r.header}).Cookies()
	if len(c) != 1 || c[0].Name != "__Host-session" || !c[0].Secure || !c[0].HttpOnly || c[0].SameSite != http.SameSiteLaxMode || c[0].Path != "/" || c[0].Domain != "" {
		t.Errorf("cookies %v, want one __Host-session: Secure, HttpOnly, SameSite=Lax, Path=/, no Domain", c)
	}
	r = serve(t, h, "POST", "/sign-in", "", map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example",
	}, []byte("code="+code))
	if r.status != http.StatusForbidden {
		t.Errorf("POST /sign-in from another origin: %d, want 403", r.status)
	}
}

// testPagesRefuseAMalformedQuery: a page whose query string cannot be
// parsed answers 400 with a page that says so, rather than reading the
// pairs it can and showing the page as if the rest had not been sent; it
// changes nothing.
func testPagesRefuseAMalformedQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := newBrowser(e.url)
	wantRedirect(t, "sign in", b.submit(t, "/sign-in", url.Values{"code": {e.link(t, "ada@example.com", "ada@example.com")}}), "/account")
	code := e.link(t, "grace@example.com", "grace@example.com")
	for _, path := range []string{
		"/?notice=signed-out&x=%%%bad",
		"/?notice=%zz",
		"/sign-in?code=" + code + "&x=%%%bad",
		"/sign-in?code=" + code + ";x",
		"/sign-in?code=%",
		"/confirm-email?code=" + code + "&x=%G0",
		"/account?notice=email-sent&x=%",
		"/account?%%%bad",
	} {
		before := e.snapshot(t)
		wantPage(t, "GET "+path, b.get(t, path), http.StatusBadRequest, "The request is malformed.")
		e.unchanged(t, "GET "+path, before)
	}
	wantPage(t, "the sign-in link, well formed", b.get(t, "/sign-in?code="+code), http.StatusOK, `value="`+code+`"`)
}

// testPagesAreStrictAndEscaped: the pages run only their own script and
// style sheet, send no referrer elsewhere, are never cached or framed,
// escape what they show, and show notices only by their key; the icon
// and robots.txt, which browsers and crawlers ask for, are served.
func testPagesAreStrictAndEscaped(t *testing.T) {
	t.Parallel()
	var used atomic.Int32
	h := httpapi.NewServer(httpapi.Deps{Users: countingUsers{used: &used}})
	for _, path := range []string{"/", "/sign-in", "/confirm-email"} {
		r := serve(t, h, "GET", path+`?code=abc%22%3E%3Cscript%3Ex()%3C/script%3E&notice=%3Cscript%3Ey()%3C/script%3E`, "", nil, nil)
		if want := map[bool]int{true: http.StatusOK, false: http.StatusBadRequest}[path == "/"]; r.status != want {
			t.Fatalf("GET %s: %s", path, r)
		}
		body := string(r.body)
		if strings.Contains(body, "<script>") || strings.Contains(body, "y()") {
			t.Errorf("GET %s: what the address carries reached the page unescaped:\n%s", path, body)
		}
		if path != "/" && strings.Contains(body, "x()") {
			t.Errorf("GET %s: the page of a code that does not work holds the code:\n%s", path, body)
		}
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "form-action 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q allows something unsafe", path, csp)
		}
		for header, want := range map[string]string{"Referrer-Policy": "same-origin", "Cache-Control": "no-store", "X-Frame-Options": "DENY"} {
			if got := r.header.Get(header); got != want {
				t.Errorf("GET %s: %s = %q, want %q", path, header, got, want)
			}
		}
	}
	if n := used.Load(); n != 0 {
		t.Errorf("opening the pages used a code %d times, want never", n)
	}
	// The static files, with the icon a browser asks for on its own and the
	// rules for crawlers, which keep them off the pages of codes.
	for path, ct := range map[string]string{
		"/assets/pages.js":  "text/javascript; charset=utf-8",
		"/assets/pages.css": "text/css; charset=utf-8",
		"/favicon.ico":      "image/x-icon",
		"/robots.txt":       "text/plain; charset=utf-8",
	} {
		r := serve(t, h, "GET", path, "", nil, nil)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != ct || len(r.body) == 0 {
			t.Errorf("GET %s: %d %s, want %s", path, r.status, r.header.Get("Content-Type"), ct)
		}
		checkContract(t, "GET", path, nil, r)
	}
	if r := serve(t, h, "GET", "/favicon.ico", "", nil, nil); !bytes.HasPrefix(r.body, []byte{0, 0, 1, 0}) {
		t.Errorf("GET /favicon.ico: no ICO file: % x", r.body[:min(len(r.body), 8)])
	}
	robots := string(serve(t, h, "GET", "/robots.txt", "", nil, nil).body)
	for _, want := range []string{"User-agent: *", "Disallow: /sign-in\n", "Disallow: /confirm-email\n", "Disallow: /account\n", "Disallow: /v1/\n"} {
		if !strings.Contains(robots, want) {
			t.Errorf("robots.txt lacks %q:\n%s", want, robots)
		}
	}
}

// testPagesShareTheClientLimit: the pages' forms count against the same
// per-client budget as the API, and over it a page says so in HTML.
func testPagesShareTheClientLimit(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, RateLimit: 2, Now: func() time.Time { return start }})
	const remote = "192.0.2.7:1000"
	for range 2 {
		wantStatus(t, "API within the limit", serve(t, h, "POST", "/v1/sign-in-links", remote,
			map[string]string{"Content-Type": "application/json"}, []byte(emailBody("ada@example.com"))), http.StatusAccepted)
	}
	for _, r := range []response{
		serve(t, h, "POST", "/", remote, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, []byte("email=ada%40example.com")),
		serve(t, h, "GET", "/account", remote, map[string]string{"Cookie": "session=" + fakeToken}, nil),
	} {
		if r.status != http.StatusTooManyRequests || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || r.header.Get("Retry-After") == "" {
			t.Errorf("a page over the limit: %d %s Retry-After %q, want 429 HTML with Retry-After", r.status, r.header.Get("Content-Type"), r.header.Get("Retry-After"))
		}
	}
}
