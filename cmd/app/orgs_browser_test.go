package main

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/eventsourced/accounts/internal/browsertest"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

// TestOrganizationsInTheBrowser walks two people through the pages of the
// organizations in headless Chromium, each in a browser of their own,
// against the whole app and a real SMTP server: on PostgreSQL with
// JavaScript, and on SQLite without. (Each backend and each way of
// sending a form is walked once; all four pairs would add minutes to a
// package that the default timeout of go test bounds.) Ada signs in,
// creates an organization from her account page and invites Bob with its
// form; the link of the mailed invitation, opened in Ada's browser,
// offers her no button that accepts, but a sign-out. Bob opens it without a session,
// is led to sign in, signs in with the code of the sign-in mail, comes
// back to the invitation and accepts it. Ada sees him, makes him an
// owner; he leaves; Ada, the last owner, cannot leave, and deletes the
// organization, whose page Bob then cannot see. Every page passes
// axe-core's accessibility check and leaves a screenshot in the test's
// artifact directory.
func TestOrganizationsInTheBrowser(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		backend string
		opts    []browsertest.Option
	}{
		"PostgreSQLWithJavaScript": {"PostgreSQL", nil},
		"SQLiteWithoutJavaScript":  {"SQLite", []browsertest.Option{browsertest.WithoutJavaScript()}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			orgsInTheBrowser(t, e2eDatabases[c.backend](t), c.opts == nil, c.opts)
		})
	}
}

func orgsInTheBrowser(t *testing.T, database e2eDatabase, scripts bool, opts []browsertest.Option) {
	mx := smtptest.NewServer(t)
	const linkBase = "http://accounts.test"
	app := e2eStart(t, database.env(map[string]string{
		"DATA_KEY":  testDataKey,
		"HTTP_ADDR": "127.0.0.1:0",
		"SMTP_URL":  mx.URL(),
		"BASE_URL":  linkBase,
		"MAIL_FROM": "accounts@accounts.test",
	}))
	mails := &e2eMails{mx: mx}
	// open follows a mailed link to this app.
	open := func(link string) string {
		t.Helper()
		if !strings.HasPrefix(link, linkBase+"/") {
			t.Fatalf("link %q does not start with BASE_URL %s", link, linkBase)
		}
		return app.base + strings.TrimPrefix(link, linkBase)
	}
	ada := &orgPerson{t: t, ctx: browsertest.New(t, opts...), name: "ada"}
	bob := &orgPerson{t: t, ctx: browsertest.New(t, opts...), name: "bob"}
	submit := chromedp.CSS(`button[type="submit"]`)
	button := func(action string) chromedp.CSS {
		return chromedp.CSS(`form[action$="` + action + `"] button[type="submit"]`)
	}
	signedIn := chromedp.WaitVisible(chromedp.ID("current-email"))
	onOrgPage := chromedp.WaitVisible(chromedp.ID("your-role"))
	const noOrgs = "You are in no organization yet."

	// Ada signs in and creates an organization from her account page.
	ada.step("01-home", chromedp.Navigate(app.base+"/"), chromedp.WaitVisible(chromedp.ID("email")))
	ada.step("02-link-sent",
		chromedp.SendKeys(chromedp.ID("email"), "ada@example.com"),
		chromedp.Click(submit),
		chromedp.WaitVisible(chromedp.ID("sent-to")),
	)
	ada.step("03-account",
		chromedp.Navigate(open(linkBase+"/sign-in?code="+mails.nextCode(t, "ada@example.com", "/sign-in"))),
		chromedp.WaitVisible(chromedp.ID("code")),
		chromedp.Click(submit),
		signedIn,
	)
	if got := ada.text("main"); !strings.Contains(got, noOrgs) {
		t.Errorf("the account page of an account in no organization says:\n%s\nwant %q", got, noOrgs)
	}
	ada.send("04-org-created", http.StatusOK,
		chromedp.SendKeys(chromedp.ID("org-name"), "  Analytical Engines "),
		chromedp.Click(button("/account/orgs")),
	)
	orgPage := ada.path()
	if !regexp.MustCompile(`^/orgs/[0-9a-f-]{36}$`).MatchString(orgPage) {
		t.Fatalf("the new organization's page is at %q, want /orgs/{id}", orgPage)
	}
	if got := ada.text("h1"); got != "Analytical Engines" {
		t.Errorf("the organization's page is headed %q, want its trimmed name", got)
	}
	if got := ada.text(".notice"); got != "The organization is created, and you are its owner." {
		t.Errorf("after creating the organization the notice says %q", got)
	}
	if got := ada.text("#your-role"); got != "Owner" {
		t.Errorf("the creator's role is %q, want Owner", got)
	}
	ada.checkMembers("the new organization", "ada@example.com (you) | Owner")

	// Ada invites Bob with the form of the organization's page.
	ada.send("05-invited", http.StatusOK,
		chromedp.SendKeys(chromedp.ID("invite-email"), "Bob@Example.com"),
		chromedp.Click(button("/invite")),
	)
	if got := ada.text(".notice"); got != "The invitation is on its way." {
		t.Errorf("after inviting the notice says %q", got)
	}
	if got := ada.text("ul.invitations"); !strings.Contains(got, "bob@example.com") || !strings.Contains(got, "Member, expires") {
		t.Errorf("the pending invitations are %q, want bob@example.com's as a member", got)
	}
	ada.step("06-account-with-org",
		chromedp.Navigate(app.base+"/account"),
		chromedp.WaitVisible(chromedp.CSS("ul.orgs")),
	)
	if got := ada.text("ul.orgs"); got != "Analytical Engines Owner" {
		t.Errorf("Ada's account lists the organizations %q, want Analytical Engines, hers as owner", got)
	}
	ada.step("07-org-from-account", chromedp.Click(chromedp.CSS("ul.orgs a")), onOrgPage)
	if got := ada.path(); got != orgPage {
		t.Errorf("the account page's link went to %q, want %s", got, orgPage)
	}

	mails.read++
	mail := mx.Wait(t, mails.read, e2eWait)[mails.read-1]
	e2eCheckMail(t, mail, "bob@example.com", "You are invited to join an organization")
	if !strings.Contains(mail.Text, "“Analytical Engines”") {
		t.Errorf("the invitation does not name the organization:\n%s", mail.Text)
	}
	invitation := open(linkBase + "/invitations?code=" + e2eLinkCode(t, mail, linkBase+"/invitations?code="))

	// The link, opened with another address's session, offers no button
	// that accepts with it, but a sign-out; opening it uses nothing up.
	ada.step("08-invitation-of-another",
		chromedp.Navigate(invitation),
		chromedp.WaitVisible(chromedp.ID("signed-in-as")),
	)
	if got := ada.text("#signed-in-as"); !strings.HasPrefix(got, "You are signed in as ada@example.com in this browser. Accepting needs a session of the invited address") {
		t.Errorf("the invitation of another address, with Ada's session, says %q", got)
	}
	if n := ada.count(`form[action$="/invitations"]`); n != 0 {
		t.Errorf("the invitation of another address has %d forms that accept, want none", n)
	}
	if n := ada.count(`form[action$="/sign-out"] button[type="submit"]`); n != 1 {
		t.Errorf("the invitation of another address has %d sign-out buttons, want 1", n)
	}

	// Bob opens the link without a session and is led to sign in.
	bob.step("01-invitation",
		chromedp.Navigate(invitation),
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	if got := bob.text("#org-name"); got != "Analytical Engines" {
		t.Errorf("the invitation page names the organization %q", got)
	}
	if got := bob.text("#invited"); got != "bob@example.com" {
		t.Errorf("the invitation page says it is for %q, want bob@example.com", got)
	}
	if got := bob.value("#email"); got != "bob@example.com" {
		t.Errorf("the invitation page offers to sign in as %q, want bob@example.com", got)
	}
	bob.step("02-link-sent", chromedp.Click(submit), chromedp.WaitVisible(chromedp.ID("sent-to")))
	if got := bob.text("#sent-to"); got != "bob@example.com" {
		t.Errorf("the page says the sign-in link went to %q, want bob@example.com", got)
	}
	// He signs in with the code of the mail, and comes back to the
	// invitation.
	bob.send("03-back-at-invitation", http.StatusOK,
		chromedp.SendKeys(chromedp.ID("code"), mails.nextCode(t, "bob@example.com", "/sign-in")),
		chromedp.Click(submit),
	)
	if got := app.base + bob.location(); got != invitation {
		t.Fatalf("signed in at %s, want back at the invitation %s", got, invitation)
	}
	if got := bob.text("#signed-in-as"); got != "You are signed in as bob@example.com in this browser." {
		t.Errorf("back at the invitation the page says %q", got)
	}
	// The code went into a cookie for the round trip through the sign-in
	// mail; signed in as the invited address, the browser keeps it no more.
	if cookies := bob.cookies(); slices.Contains(cookies, "invitation") {
		t.Errorf("back at the invitation, signed in as its address, the browser keeps the invitation's cookie: %v", cookies)
	}
	if scripts {
		bob.step("04-joined", browserPressTwice(t, submit, "*/invitations", onOrgPage))
	} else {
		bob.send("04-joined", http.StatusOK, chromedp.Click(submit))
	}
	if got := bob.path(); got != orgPage {
		t.Fatalf("after accepting Bob is at %q, want the organization's page %s", got, orgPage)
	}
	if got := bob.text(".notice"); got != "You have joined the organization." {
		t.Errorf("after accepting the notice says %q", got)
	}
	if got := bob.text("#your-role"); got != "Member" {
		t.Errorf("Bob's role is %q, want Member", got)
	}
	bob.checkMembers("the organization Bob joined", "ada@example.com | Owner", "bob@example.com (you) | Member")
	if n := bob.count(`form.role, form[action$="/invite"], form[action$="/remove"], form[action$="/delete"]`); n != 0 {
		t.Errorf("a member's page has %d forms of the owners, want none", n)
	}
	bob.step("05-account-with-org",
		chromedp.Navigate(app.base+"/account"),
		chromedp.WaitVisible(chromedp.CSS("ul.orgs")),
	)
	if got := bob.text("ul.orgs"); got != "Analytical Engines Member" {
		t.Errorf("Bob's account lists the organizations %q, want Analytical Engines, his as member", got)
	}

	// Ada sees Bob and makes him an owner.
	ada.step("09-member-joined", chromedp.Navigate(app.base+orgPage), onOrgPage)
	ada.checkMembers("the organization Bob joined", "ada@example.com (you) | Owner", "bob@example.com | Member")
	if n := ada.count("ul.invitations"); n != 0 {
		t.Errorf("the accepted invitation is still listed as pending")
	}
	bobID := ada.eval(`[...document.querySelectorAll("ul.members > li")]
		.find(li => li.querySelector(".who").textContent.startsWith("bob@"))
		.querySelector('input[name="user_id"]').value`)
	ada.send("10-role-changed", http.StatusOK,
		chromedp.SetValue(chromedp.ID("role-"+bobID), "owner"),
		chromedp.Click(chromedp.CSS("#role-"+bobID+" ~ button")),
	)
	if got := ada.text(".notice"); got != "The role is changed." {
		t.Errorf("after the change of role the notice says %q", got)
	}
	ada.checkMembers("the organization after Bob's promotion", "ada@example.com (you) | Owner", "bob@example.com | Owner")

	// Bob, an owner now, leaves.
	bob.step("06-owner", chromedp.Navigate(app.base+orgPage), chromedp.WaitVisible(chromedp.ID("invite-email")))
	if got := bob.text("#your-role"); got != "Owner" {
		t.Errorf("Bob's role after his promotion is %q, want Owner", got)
	}
	bob.send("07-left", http.StatusOK, chromedp.Click(button("/leave")))
	if got := bob.path(); got != "/account" {
		t.Errorf("after leaving Bob is at %q, want /account", got)
	}
	if got := bob.text(".notice"); got != "You have left the organization." {
		t.Errorf("after leaving the notice says %q", got)
	}
	if got := bob.text("main"); !strings.Contains(got, noOrgs) {
		t.Errorf("after leaving Bob's account page says:\n%s\nwant %q", got, noOrgs)
	}

	// Ada, the last owner, cannot leave; she deletes the organization.
	ada.step("11-member-left", chromedp.Navigate(app.base+orgPage), onOrgPage)
	ada.checkMembers("the organization Bob left", "ada@example.com (you) | Owner")
	ada.send("12-last-owner", http.StatusConflict, chromedp.Click(button("/leave")))
	if got := ada.text("#error"); got != "The organization's last owner cannot leave, be removed or stop being an owner." {
		t.Errorf("the last owner's leaving says %q", got)
	}
	ada.takeStatusError(http.StatusConflict, app.base+orgPage+"/leave")
	ada.checkMembers("the organization its last owner tried to leave", "ada@example.com (you) | Owner")
	ada.send("13-org-deleted", http.StatusOK,
		chromedp.Click(chromedp.ID("confirm-delete-org")),
		chromedp.Click(button("/delete")),
	)
	if got := ada.path(); got != "/account" {
		t.Errorf("after deleting the organization Ada is at %q, want /account", got)
	}
	if got := ada.text(".notice"); got != "The organization is deleted." {
		t.Errorf("after deleting the organization the notice says %q", got)
	}
	if got := ada.text("main"); !strings.Contains(got, noOrgs) {
		t.Errorf("after deleting the organization Ada's account page says:\n%s\nwant %q", got, noOrgs)
	}
	bob.sendNavigate("08-no-such-org", http.StatusNotFound, app.base+orgPage)
	if got := bob.text("h1"); got != "There is no such organization" {
		t.Errorf("the page of a deleted organization is headed %q", got)
	}
	bob.takeStatusError(http.StatusNotFound, app.base+orgPage)
	app.stop(t)
}

// orgPerson is one person's browser in the walk-through of
// [TestOrganizationsInTheBrowser]; name starts the names of its
// screenshots.
type orgPerson struct {
	t    *testing.T
	ctx  context.Context
	name string
}

// step runs a step's actions and checks the page it ends on.
func (p *orgPerson) step(name string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, e2eWait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.failed(name, err)
	}
	p.check(name)
}

// send runs a step's actions, which send a form, waits for the page they
// lead to, checks that it came with status, and checks the page. Waiting
// for the page's load, not for an element, tells it from the page the form
// was on, which may have the same elements.
func (p *orgPerson) send(name string, status int, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, e2eWait)
	defer cancel()
	res, err := chromedp.RunResponse(ctx, actions...)
	if err != nil {
		p.failed(name, err)
	}
	if res.Status != int64(status) {
		p.t.Errorf("%s-%s: the page came with %d %s, want %d", p.name, name, res.Status, res.StatusText, status)
	}
	p.check(name)
}

// sendNavigate goes to the page at link, checks that it came with status,
// and checks the page.
func (p *orgPerson) sendNavigate(name string, status int, link string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, e2eWait)
	defer cancel()
	res, err := chromedp.Run(ctx, chromedp.NavigateResponse(link))
	if err != nil {
		p.failed(name, err)
	}
	if res.Status != int64(status) {
		p.t.Errorf("%s-%s: %s came with %d %s, want %d", p.name, name, link, res.Status, res.StatusText, status)
	}
	p.check(name)
}

// failed fails the test at a step that did not end, with a screenshot of
// where it stopped.
func (p *orgPerson) failed(name string, err error) {
	p.t.Helper()
	p.t.Errorf("%s-%s: %v", p.name, name, err)
	browsertest.Screenshot(p.t, p.ctx, p.name+"-"+name+"-failed")
	p.t.FailNow()
}

// check runs axe-core and the checks of every page on the page of the
// step, and keeps its screenshot.
func (p *orgPerson) check(name string) {
	p.t.Helper()
	browsertest.CheckAccessibility(p.t, p.ctx)
	browserCheckPage(p.t, p.ctx, p.name+"-"+name)
	browsertest.Screenshot(p.t, p.ctx, p.name+"-"+name)
}

// text returns the visible text of the element sel, trimmed.
func (p *orgPerson) text(sel string) string {
	p.t.Helper()
	return strings.TrimSpace(browsertest.Run(p.t, p.ctx, chromedp.Text(chromedp.CSS(sel))))
}

// value returns the value of the field sel.
func (p *orgPerson) value(sel string) string {
	p.t.Helper()
	return browsertest.Run(p.t, p.ctx, chromedp.Value(chromedp.CSS(sel)))
}

// count returns how many elements match sel.
func (p *orgPerson) count(sel string) int {
	p.t.Helper()
	return browsertest.Run(p.t, p.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
}

// eval returns the string that the expression js gives in the page.
func (p *orgPerson) eval(js string) string {
	p.t.Helper()
	return browsertest.Run(p.t, p.ctx, chromedp.Evaluate[string](js))
}

// location returns the path and query of the page.
func (p *orgPerson) location() string {
	p.t.Helper()
	u, err := url.Parse(browsertest.Run(p.t, p.ctx, chromedp.Location()))
	if err != nil {
		p.t.Fatal(err)
	}
	return u.RequestURI()
}

// path returns the path of the page.
func (p *orgPerson) path() string {
	p.t.Helper()
	u, err := url.Parse(browsertest.Run(p.t, p.ctx, chromedp.Location()))
	if err != nil {
		p.t.Fatal(err)
	}
	return u.Path
}

// checkMembers checks the members that the organization's page lists, in
// its order, each as "address | Role", " (you)" after the browser's own.
func (p *orgPerson) checkMembers(what string, want ...string) {
	p.t.Helper()
	got := browsertest.Run(p.t, p.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("ul.members > li")].map(li =>
		li.querySelector(".who").textContent.trim() + " | " + li.querySelector(".hint").textContent.split(",")[0].trim())`))
	if !slices.Equal(got, want) {
		p.t.Errorf("%s: %s's page lists the members %q, want %q", what, p.name, got, want)
	}
}

// takeStatusError takes the console's errors, and fails the test unless
// they are the one the browser logs for a page that came with status.
func (p *orgPerson) takeStatusError(status int, link string) {
	p.t.Helper()
	for _, m := range browsertest.ConsoleErrors(p.t, p.ctx) {
		if m.Kind != "log/network" || !strings.Contains(m.Text, strconv.Itoa(status)) || m.URL != link {
			p.t.Errorf("%s's page logged %s, want only its %d", p.name, m, status)
		}
	}
}

// cookies returns the names of the cookies the browser keeps.
func (p *orgPerson) cookies() []string {
	p.t.Helper()
	res := browsertest.Run(p.t, p.ctx, func(ctx context.Context, tab *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, tab, network.GetCookies, network.GetCookiesParams{})
	})
	var names []string
	for _, c := range res.Cookies {
		names = append(names, c.Name)
	}
	return names
}
