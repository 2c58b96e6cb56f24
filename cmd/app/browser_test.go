package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/eventsourced/accounts/internal/browsertest"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

// TestBrowser walks people through the pages in headless Chromium
// against the whole app and a real SMTP server.
func TestBrowser(t *testing.T) {
	t.Parallel()
	t.Run("SignInChangeOfAddressAndSignOut", testSignInChangeOfAddressAndSignOut)
	t.Run("OnANarrowScreen", testOnANarrowScreen)
}

// testSignInChangeOfAddressAndSignOut walks a person through the
// pages in headless Chromium against the whole app and a real SMTP server,
// once with JavaScript and once without: ask for a link on /, open the
// mailed link, sign in, change the address from the link mailed to the new
// one, sign out, and sign in again to delete the account. Every page
// passes axe-core's accessibility check and leaves a screenshot in the
// test's artifact directory.
func testSignInChangeOfAddressAndSignOut(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]browsertest.Option{
		"JavaScript":   nil,
		"NoJavaScript": {browsertest.WithoutJavaScript()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			browserWalkThrough(t, name == "JavaScript", opts)
		})
	}
}

func browserWalkThrough(t *testing.T, scripts bool, opts []browsertest.Option) {
	mx := smtptest.NewServer(t)
	const linkBase = "http://accounts.test"
	app := e2eStart(t, map[string]string{
		"DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "accounts.db"),
		"HTTP_ADDR":    "127.0.0.1:0",
		"SMTP_URL":     mx.URL(),
		"BASE_URL":     linkBase,
		"MAIL_FROM":    "accounts@accounts.test",
	})
	ctx := browsertest.New(t, opts...)
	// open follows a mailed link to this app.
	open := func(link string) string {
		t.Helper()
		if !strings.HasPrefix(link, linkBase+"/") {
			t.Fatalf("link %q does not start with BASE_URL %s", link, linkBase)
		}
		return app.base + strings.TrimPrefix(link, linkBase)
	}
	// step runs a step's actions, checks the page it ends on and keeps its
	// screenshot.
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, e2eWait)
		defer cancel()
		if err := chromedp.Do(actx, actions...); err != nil {
			t.Errorf("%s: %v", name, err)
			browsertest.Screenshot(t, ctx, name+"-failed")
			t.FailNow()
		}
		browsertest.CheckAccessibility(t, ctx)
		browserCheckPage(t, ctx, name)
		browsertest.Screenshot(t, ctx, name)
	}
	text := func(sel chromedp.CSS) string {
		t.Helper()
		return strings.TrimSpace(browsertest.Run(t, ctx, chromedp.Text(sel)))
	}
	path := func() string {
		t.Helper()
		u, err := url.Parse(browsertest.Run(t, ctx, chromedp.Location()))
		if err != nil {
			t.Fatal(err)
		}
		return u.Path
	}
	submit := chromedp.CSS(`button[type="submit"]`)

	step("1-home",
		chromedp.Navigate(app.base+"/"),
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	step("2-link-sent",
		chromedp.SendKeys(chromedp.ID("email"), "Ada@Example.com"),
		chromedp.Click(submit),
		chromedp.WaitVisible(chromedp.ID("sent-to")),
	)
	if got := text("#sent-to"); got != "Ada@Example.com" {
		t.Errorf("the page says the link went to %q, want Ada@Example.com", got)
	}

	signIn := mx.Wait(t, 1, e2eWait)[0]
	code := e2eLinkCode(t, signIn, linkBase+"/sign-in?code=")
	step("3-sign-in-link",
		chromedp.Navigate(open(linkBase+"/sign-in?code="+code)),
		chromedp.WaitVisible(chromedp.ID("code")),
	)
	if got := browsertest.Run(t, ctx, chromedp.Value(chromedp.ID("code"))); got != code {
		t.Errorf("the sign-in page shows the code %q, want %q", got, code)
	}
	if got := text("#who"); got != "ada@example.com" {
		t.Errorf("the sign-in page says it signs in %q, want ada@example.com", got)
	}

	signedIn := chromedp.WaitVisible(chromedp.ID("current-email"))
	if scripts {
		step("4-account", browserPressTwice(t, submit, "*/sign-in", signedIn))
	} else {
		step("4-account", chromedp.Click(submit), signedIn)
	}
	if got := text("#current-email"); got != "ada@example.com" {
		t.Errorf("the account's address is %q, want ada@example.com", got)
	}
	if got := path(); got != "/account" {
		t.Errorf("signed in at %q, want /account", got)
	}
	browserCheckSessionCookie(t, ctx, scripts)

	step("5-change-asked",
		chromedp.SendKeys(chromedp.ID("new-email"), "grace@example.com"),
		chromedp.Click(chromedp.CSS(`form[action="/account/email"] button`)),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	if got := text(".notice"); !strings.Contains(got, "We sent a confirmation link") {
		t.Errorf("after asking for the change the notice says %q", got)
	}
	change := mx.Wait(t, 2, e2eWait)[1]
	changeCode := e2eLinkCode(t, change, linkBase+"/confirm-email?code=")
	step("6-confirm-link",
		chromedp.Navigate(open(linkBase+"/confirm-email?code="+changeCode)),
		chromedp.WaitVisible(chromedp.ID("code")),
	)
	if from, to := text("#from"), text("#to"); from != "ada@example.com" || to != "grace@example.com" {
		t.Errorf("the confirmation page says it changes %q to %q, want ada@example.com to grace@example.com", from, to)
	}
	step("7-address-changed",
		chromedp.Click(submit),
		chromedp.WaitVisible(chromedp.ID("current-email")),
	)
	if got := text("#current-email"); got != "grace@example.com" {
		t.Errorf("the account's address after the change is %q, want grace@example.com", got)
	}
	if got := text(".notice"); got != "Your email address has been changed." {
		t.Errorf("after the change the notice says %q", got)
	}
	notice := mx.Wait(t, 3, e2eWait)[2]
	undoCode := e2eLinkCode(t, notice, linkBase+"/undo-email?code=")

	// Another client signs in to the account; the account page lists it
	// beside this browser, and ends it.
	app.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"grace@example.com"}`, http.StatusAccepted, nil)
	var other struct {
		Token string `json:"token"`
	}
	app.expect(t, "POST", "/v1/sessions", "", e2eJSON(t, map[string]string{"code": e2eLinkCode(t, mx.Wait(t, 4, e2eWait)[3], linkBase+"/sign-in?code=")}), http.StatusCreated, &other)
	endOther := chromedp.CSS(`form[action="/account/sessions/end"] button`)
	step("7a-sessions",
		chromedp.Navigate(app.base+"/account"),
		chromedp.WaitVisible(endOther),
	)
	if got := text(".sessions"); !strings.Contains(got, "(this browser)") || !strings.Contains(got, "Chrome") {
		t.Errorf("the account page lists the sessions as %q, want this browser's, a Chrome, marked", got)
	}
	step("7b-session-ended",
		chromedp.Click(endOther),
		chromedp.WaitVisible(chromedp.CSS(".notice")),
	)
	if got := text(".notice"); got != "That session has ended." {
		t.Errorf("after ending the other session the notice says %q", got)
	}
	app.expect(t, "GET", "/v1/me", other.Token, "", http.StatusUnauthorized, nil)

	step("8-signed-out",
		chromedp.Click(chromedp.CSS(`form[action="/sign-out"] button`)),
		// The account page has a notice too; the sign-in form is the start page's.
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	if got := text(".notice"); got != "You have signed out." {
		t.Errorf("after signing out the notice says %q", got)
	}
	step("9-account-after-sign-out",
		chromedp.Navigate(app.base+"/account"),
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	if got := path(); got != "/" {
		t.Errorf("/account after signing out went to %q, want /", got)
	}

	// The mail to the address the account left undoes the change.
	step("9a-undo-link",
		chromedp.Navigate(open(linkBase+"/undo-email?code="+undoCode)),
		chromedp.WaitVisible(chromedp.ID("code")),
	)
	if got := text("#undo-to"); got != "ada@example.com" {
		t.Errorf("the undo page says it moves the account back to %q, want ada@example.com", got)
	}
	step("9b-undone",
		chromedp.Click(submit),
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	if got := text(".notice"); !strings.HasPrefix(got, "The change of address is undone") {
		t.Errorf("after the undo the notice says %q", got)
	}

	// Signed in again, at the address the account is back at, the person
	// deletes their account.
	step("10-link-sent-again",
		chromedp.SendKeys(chromedp.ID("email"), "ada@example.com"),
		chromedp.Click(submit),
		chromedp.WaitVisible(chromedp.ID("sent-to")),
	)
	again := e2eLinkCode(t, mx.Wait(t, 5, e2eWait)[4], linkBase+"/sign-in?code=")
	step("11-account-again",
		chromedp.Navigate(open(linkBase+"/sign-in?code="+again)),
		chromedp.WaitVisible(chromedp.ID("code")),
		chromedp.Click(submit),
		signedIn,
	)
	step("12-deleted",
		chromedp.Click(chromedp.ID("confirm-delete")),
		chromedp.Click(chromedp.CSS(`form[action="/account/delete"] button`)),
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	if got := text(".notice"); !strings.HasPrefix(got, "Your account is deleted") {
		t.Errorf("after the deletion the notice says %q", got)
	}
	step("13-account-after-deletion",
		chromedp.Navigate(app.base+"/account"),
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	if got := path(); got != "/" {
		t.Errorf("/account after the deletion went to %q, want /", got)
	}
	app.stop(t)
}

// testOnANarrowScreen takes a person with a long address through
// the pages on a phone's screen, 390 px wide: the address wraps only after
// its @ or before a dot, never inside a word, and no page is wider than
// the screen; the page of a link already used says so and leads to a new
// link, with no button that would send the dead code. Every page passes
// axe-core's check.
func testOnANarrowScreen(t *testing.T) {
	t.Parallel()
	mx := smtptest.NewServer(t)
	const linkBase = "http://accounts.test"
	app := e2eStart(t, map[string]string{
		"DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "accounts.db"),
		"HTTP_ADDR":    "127.0.0.1:0",
		"SMTP_URL":     mx.URL(),
		"BASE_URL":     linkBase,
		"MAIL_FROM":    "accounts@accounts.test",
	})
	// Longer than a line of the screen, with no hyphen, where a browser
	// would break on its own.
	const long = "augusta.ada.king.lovelace.countess@analytical.engine.example.org"
	ctx := browsertest.New(t)
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, e2eWait)
		defer cancel()
		if err := chromedp.Do(actx, actions...); err != nil {
			t.Errorf("%s: %v", name, err)
			browsertest.Screenshot(t, ctx, name+"-failed")
			t.FailNow()
		}
		browsertest.CheckAccessibility(t, ctx)
		browserCheckPage(t, ctx, name)
		browsertest.Screenshot(t, ctx, name)
	}
	submit := chromedp.CSS(`button[type="submit"]`)

	step("1-home",
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(app.base+"/"),
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	step("2-link-sent",
		chromedp.SendKeys(chromedp.ID("email"), long),
		chromedp.Click(submit),
		chromedp.WaitVisible(chromedp.ID("sent-to")),
	)
	browserCheckWrap(t, ctx, "the page of the link sent", "#sent-to", long)
	code := e2eLinkCode(t, mx.Wait(t, 1, e2eWait)[0], linkBase+"/sign-in?code=")
	link := app.base + "/sign-in?code=" + code
	step("3-sign-in-link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("code")))
	browserCheckWrap(t, ctx, "the sign-in page", "#who", long)
	step("4-account", chromedp.Click(submit), chromedp.WaitVisible(chromedp.ID("current-email")))
	browserCheckWrap(t, ctx, "the account page", "#current-email", long)

	step("5-used-link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("a.action")))
	if got := strings.TrimSpace(browsertest.Run(t, ctx, chromedp.Text(chromedp.ID("error")))); got != "This link is unknown, used or expired." {
		t.Errorf("the page of the used link says %q", got)
	}
	if href := browsertest.Run(t, ctx, chromedp.Evaluate[string](`document.querySelector("a.action").getAttribute("href")`)); href != "/" {
		t.Errorf("the page of the used link leads to %q, want / to ask for a new link", href)
	}
	if n := browsertest.Run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("form, button, input").length`)); n != 0 {
		t.Errorf("the page of the used link has %d forms, buttons or fields, want none", n)
	}
	// The page comes with 400, which the console shows; nothing else may.
	for _, m := range browsertest.ConsoleErrors(t, ctx) {
		if m.Kind != "log/network" || !strings.Contains(m.Text, "400") || m.URL != link {
			t.Errorf("the page of the used link logged %s", m)
		}
	}
	step("6-new-link-asked",
		chromedp.Click(chromedp.CSS("a.action")),
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	app.stop(t)
}

// browserCheckPage checks what every page has, whatever its content: a
// meta description, and nothing wider than the window, which would make
// the page scroll sideways.
func browserCheckPage(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	const js = `({
		Description: (document.querySelector('meta[name="description"]') || {}).content || "",
		Width: document.documentElement.clientWidth,
		ScrollWidth: document.documentElement.scrollWidth,
	})`
	got := browsertest.Run(t, ctx, chromedp.Evaluate[struct {
		Description        string
		Width, ScrollWidth int
	}](js))
	if strings.TrimSpace(got.Description) == "" {
		t.Errorf("%s: the page has no meta description", name)
	}
	if got.ScrollWidth > got.Width {
		t.Errorf("%s: the page is %d px wide in a window of %d px", name, got.ScrollWidth, got.Width)
	}
}

// browserCheckWrap checks that the element sel shows the address want,
// that it takes more than one line (or the check would prove nothing), and
// that each line after the first starts with a dot or follows the @.
func browserCheckWrap(t *testing.T, ctx context.Context, what, sel, want string) {
	t.Helper()
	// The line of each character is told by the top of its box; the index
	// of each character that starts a new line is a break.
	const js = `((sel) => {
		const el = document.querySelector(sel);
		const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
		let text = "", top = null;
		const breaks = [];
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			for (let i = 0; i < n.length; i++) {
				const r = document.createRange();
				r.setStart(n, i);
				r.setEnd(n, i + 1);
				const box = r.getBoundingClientRect();
				if (top !== null && box.top > top + box.height / 2) breaks.push(text.length);
				top = box.top;
				text += n.data[i];
			}
		}
		return {Text: text, Breaks: breaks, Right: el.getBoundingClientRect().right, Width: document.documentElement.clientWidth};
	})(%s)`
	got := browsertest.Run(t, ctx, chromedp.Evaluate[struct {
		Text         string
		Breaks       []int
		Right, Width float64
	}](fmt.Sprintf(js, strconv.Quote(sel))))
	if got.Text != want {
		t.Fatalf("%s shows %q, want %q", what, got.Text, want)
	}
	if len(got.Breaks) == 0 {
		t.Errorf("%s shows the address on one line, %.0f px wide in a window of %.0f px: it does not break", what, got.Right, got.Width)
	}
	for _, b := range got.Breaks {
		if got.Text[b-1] != '@' && got.Text[b] != '.' {
			t.Errorf("%s breaks the address inside a word: %q | %q", what, got.Text[:b], got.Text[b:])
		}
	}
	if got.Right > got.Width {
		t.Errorf("%s: the address runs to %.0f px in a window of %.0f px", what, got.Right, got.Width)
	}
}

// browserPressTwice returns an action that presses the button sel, and
// presses it again while the POST of the first press (to a URL that
// pattern matches) is held, then lets it go and runs then; it fails t
// unless the browser sent one POST. pages.js sends a form once however
// often its button is pressed; without it the second press would POST the
// sign-in code again, which finds the code used.
func browserPressTwice(t *testing.T, sel chromedp.CSS, pattern string, then chromedp.Action[chromedp.Void]) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tab *chromedp.Target) error {
		lctx, stop := context.WithCancel(ctx)
		defer stop()
		paused := make(chan fetch.EventRequestPaused, 8)
		events := cdp.Events(lctx, tab, fetch.RequestPaused)
		go func() {
			for e, err := range events {
				if err != nil {
					return
				}
				paused <- e
			}
		}()
		if _, err := cdp.Call(ctx, tab, fetch.Enable, fetch.EnableParams{
			Patterns: []*fetch.RequestPattern{{URLPattern: pattern, RequestStage: fetch.RequestStageRequest}},
		}); err != nil {
			return err
		}
		defer func() { _, _ = cdp.Call(ctx, tab, fetch.Disable, cdp.Empty{}) }()
		where := "(() => { const r = document.querySelector(" + strconv.Quote(string(sel)) + ").getBoundingClientRect();" +
			" return {X: r.x + r.width / 2, Y: r.y + r.height / 2}; })()"
		box, err := chromedp.Evaluate[struct{ X, Y float64 }](where)(ctx, tab)
		if err != nil {
			return err
		}
		if _, err := chromedp.MouseClickXY(box.X, box.Y)(ctx, tab); err != nil {
			return err
		}
		var first fetch.EventRequestPaused
		select {
		case first = <-paused:
		case <-ctx.Done():
			return fmt.Errorf("the first press sent no POST: %w", ctx.Err())
		}
		// The page is on its way to the answer, so chromedp's queries wait
		// for the next document; the second press goes to where the button
		// is, as a person's would.
		if _, err := chromedp.MouseClickXY(box.X, box.Y)(ctx, tab); err != nil {
			return err
		}
		// Let the first POST go, and any other that comes, counting them.
		var posts atomic.Int32
		go func() {
			for e := first; ; {
				posts.Add(1)
				if _, err := cdp.Call(lctx, tab, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID}); err != nil {
					return
				}
				select {
				case e = <-paused:
				case <-lctx.Done():
					return
				}
			}
		}()
		if _, err := then(ctx, tab); err != nil {
			return fmt.Errorf("after %d POSTs: %w", posts.Load(), err)
		}
		if n := posts.Load(); n != 1 {
			t.Errorf("pressing the button twice sent %d POSTs, want 1", n)
		}
		return nil
	})
}

// browserCheckSessionCookie checks the session cookie as the browser keeps
// it: HttpOnly, SameSite=Lax, for the session's 30 days, and out of the
// page's scripts' reach.
func browserCheckSessionCookie(t *testing.T, ctx context.Context, scripts bool) {
	t.Helper()
	res := browsertest.Run(t, ctx, func(ctx context.Context, tab *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, tab, network.GetCookies, network.GetCookiesParams{})
	})
	var session *network.Cookie
	for _, c := range res.Cookies {
		if c.Name == "session" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("the browser keeps no session cookie: %+v", res.Cookies)
	}
	if !session.HTTPOnly || session.SameSite != network.CookieSameSiteLax || session.Path != "/" {
		t.Errorf("the browser's session cookie %+v, want HttpOnly, SameSite=Lax, Path=/", session)
	}
	if expires := time.Unix(int64(session.Expires), 0); time.Until(expires) < 29*24*time.Hour {
		t.Errorf("the session cookie expires at %v, want the session's 30 days", expires)
	}
	if !scripts {
		return
	}
	if visible := browsertest.Run(t, ctx, chromedp.Evaluate[string](`document.cookie`)); strings.Contains(visible, "session") {
		t.Errorf("the page's scripts can read the session cookie: %q", visible)
	}
}
