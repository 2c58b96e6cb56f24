package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/httpapi"
)

// orgSite is the pages over fakeUsers and fakeOrgs, whose commands calls
// hears.
type orgSite struct {
	url   string
	calls *calls
}

func newOrgSite(t *testing.T, d httpapi.Deps) orgSite {
	t.Helper()
	s := orgSite{calls: &calls{}}
	if d.Users == nil {
		d.Users = fakeUsers{}
	}
	if d.Orgs == nil {
		d.Orgs = fakeOrgs{calls: s.calls}
	}
	d.Now = func() time.Time { return start }
	srv := httptest.NewServer(httpapi.NewServer(d))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// signedIn returns a browser signed in as fakeUser.
func (s orgSite) signedIn() *browser {
	b := newBrowser(s.url)
	b.cookies["session"] = &http.Cookie{Name: "session", Value: fakeToken}
	return b
}

// wantCalls checks that the domain was asked to do want since the last
// check.
func (s orgSite) wantCalls(t *testing.T, what string, want ...string) {
	t.Helper()
	if got := s.calls.take(); !slices.Equal(got, want) {
		t.Errorf("%s: the domain was asked %q, want %q", what, got, want)
	}
}

// wantLacks checks that p's body holds none of bad.
func wantLacks(t *testing.T, what string, p page, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(string(p.body), b) {
			t.Errorf("%s: the page holds %q:\n%s", what, b, p.body)
		}
	}
}

var (
	acmePage = "/orgs/" + fakeOrgID.String()
	betaPage = "/orgs/" + fakeOtherOrgID.String()
)

// TestOrgPages holds the organizations' pages to docs/api.md: the account
// page's list and form, an organization's page and its forms, and the
// page an invitation's link opens.
func TestOrgPages(t *testing.T) {
	t.Parallel()
	t.Run("the account page lists and creates", testOrgPagesAccount)
	t.Run("an owner's page", testOrgPagesOwner)
	t.Run("a member's page", testOrgPagesMember)
	t.Run("no such organization", testOrgPagesNotFound)
	t.Run("an owner's forms act", testOrgPagesOwnerForms)
	t.Run("the forms show the problem", testOrgPagesFormProblems)
	t.Run("leave", testOrgPagesLeave)
	t.Run("refuse forms from other sites", testOrgPagesRefuseFormsFromOtherSites)
	t.Run("an invitation through sign-in", testOrgPagesInvitationThroughSignIn)
	t.Run("an invitation with a session", testOrgPagesInvitationWithASession)
	t.Run("an invitation through sign-out", testOrgPagesInvitationThroughSignOut)
	t.Run("an invitation that does not work", testOrgPagesInvitationThatDoesNotWork)
	t.Run("an outage", testOrgPagesOutage)
	t.Run("the client limit", testOrgPagesClientLimit)
}

func testOrgPagesAccount(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	b := s.signedIn()
	p := b.get(t, "/account")
	wantPage(t, "GET /account", p, http.StatusOK,
		"<h2>Your organizations</h2>",
		`<a href="`+acmePage+`">Acme</a> <span class="hint">Owner</span>`,
		`<a href="`+betaPage+`">Beta &lt;b&gt;</a> <span class="hint">Member</span>`,
		`<form method="post" action="/account/orgs">`, `<label for="org-name">`, `<input id="org-name" name="name"`)
	wantLacks(t, "GET /account", p, "<b>")

	wantRedirect(t, "POST /account/orgs", b.submit(t, "/account/orgs", url.Values{"name": {" New Co "}}), acmePage+"?notice=org-created")
	s.wantCalls(t, "POST /account/orgs", "Create New Co")
	wantPage(t, "GET the new organization", b.get(t, acmePage+"?notice=org-created"), http.StatusOK,
		"The organization is created, and you are its owner.")

	for _, c := range []struct {
		name   string
		status int
		says   string
	}{
		{"   ", http.StatusBadRequest, "That is not a name for an organization."},
		{"Too many", http.StatusConflict, "That account belongs to too many organizations."},
	} {
		p := b.submit(t, "/account/orgs", url.Values{"name": {c.name}})
		what := "POST /account/orgs " + jsonString(c.name)
		wantPage(t, what, p, c.status, c.says, `value="`+c.name+`"`,
			`aria-describedby="org-name-hint error" aria-invalid="true"`, `<dd id="current-email">`)
		// The other forms of the page are not the ones in error.
		wantLacks(t, what, p, `aria-describedby="new-email-hint error"`, `id="confirm-delete" name="confirm" type="checkbox" value="yes" required aria-describedby="confirm-delete-hint error"`)
	}
	s.wantCalls(t, "refused creations")
}

func testOrgPagesOwner(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	p := s.signedIn().get(t, acmePage)
	wantPage(t, "GET "+acmePage, p, http.StatusOK,
		"<title>Acme · Accounts</title>", "<h1>Acme</h1>", `<dd id="your-role">Owner</dd>`,
		"<h2>Members</h2>",
		shown(fakeUser.Email)+" <strong>(you)</strong>", shown(fakeMember.Email),
		// A role form per member, the owner's own too, and a remove
		// button for each other member.
		`<form method="post" action="`+acmePage+`/members/role" class="role">`,
		`<input type="hidden" name="user_id" value="`+fakeMember.UserID.String()+`">`,
		`<label for="role-`+fakeMember.UserID.String()+`">Role of bob@example.com</label>`,
		`<select id="role-`+fakeMember.UserID.String()+`" name="role">`,
		`<label for="role-`+fakeUser.ID.String()+`">`,
		`<option value="owner" selected>Owner</option>`,
		`<form method="post" action="`+acmePage+`/members/remove">`,
		`aria-label="Remove bob@example.com from the organization"`,
		// Inviting, and the pending invitations.
		"<h2>Invite someone</h2>", `<form method="post" action="`+acmePage+`/invite">`,
		`<label for="invite-email">Email address</label>`, `<label for="invite-role">Role</label>`,
		`<option value="member" selected>Member</option>`,
		"<h2>Pending invitations</h2>", shown(fakeInvite.Email),
		`<input type="hidden" name="invitation_id" value="`+fakeInvitationID.String()+`">`,
		`aria-label="Revoke the invitation of grace@example.com"`,
		// Leaving and deleting.
		`<form method="post" action="`+acmePage+`/leave">`, "Leave Acme",
		`<form method="post" action="`+acmePage+`/delete">`, `<label for="confirm-delete-org">I mean to delete Acme</label>`,
		`<input id="confirm-delete-org" name="confirm" type="checkbox" value="yes" required>`)
	if n := strings.Count(string(p.body), `/members/remove"`); n != 1 {
		t.Errorf("the owner's page has %d remove buttons, want 1, for the other member", n)
	}
}

func testOrgPagesMember(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	p := s.signedIn().get(t, betaPage+"?notice=joined")
	wantPage(t, "GET "+betaPage, p, http.StatusOK,
		"<h1>Beta &lt;b&gt;</h1>", `<dd id="your-role">Member</dd>`, "You have joined the organization.",
		shown("carol@example.com"), shown(fakeUser.Email)+" <strong>(you)</strong>",
		`<form method="post" action="`+betaPage+`/leave">`)
	// A member sees no owner's form, and the domain was not asked for the
	// invitations, which only owners may see.
	wantLacks(t, "a member's page", p, "/members/role", "/members/remove", "/invite", "Pending invitations", "/invitations/revoke", "/delete", "<b>")
}

func testOrgPagesNotFound(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	b := s.signedIn()
	for _, path := range []string{"/orgs/" + uuid.NewString(), "/orgs/not-an-id", "/orgs/" + fakeOrgID.String() + "x"} {
		wantPage(t, "GET "+path, b.get(t, path), http.StatusNotFound,
			"There is no such organization", "you are not a member of it", `<a href="/account">Go to your account</a>`)
	}
	// Without a session, sign in first.
	wantRedirect(t, "GET "+acmePage+" without a session", newBrowser(s.url).get(t, acmePage), "/")
	b.cookies["session"] = &http.Cookie{Name: "session", Value: "ended"}
	p := b.get(t, acmePage)
	wantRedirect(t, "GET "+acmePage+" with an ended session", p, "/?notice=session-ended")
	if b.cookies["session"] != nil {
		t.Errorf("an ended session's cookie stays: %v", p.cookies)
	}
	wantPage(t, "GET "+acmePage+" with a malformed query", s.signedIn().get(t, acmePage+"?%zz"), http.StatusBadRequest, "The request is malformed.")
}

func testOrgPagesOwnerForms(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	b := s.signedIn()
	acme, bob := fakeOrgID.String(), fakeMember.UserID.String()
	for _, c := range []struct {
		path   string
		form   url.Values
		to     string
		call   string
		notice string
	}{
		{acmePage + "/invite", url.Values{"email": {" Grace@Example.com"}, "role": {"owner"}}, acmePage + "?notice=invited",
			"Invite " + acme + " grace@example.com owner", "The invitation is on its way."},
		{acmePage + "/invitations/revoke", url.Values{"invitation_id": {fakeInvitationID.String()}}, acmePage + "?notice=invitation-revoked",
			"Revoke " + acme + " " + fakeInvitationID.String(), "The invitation is revoked"},
		{acmePage + "/members/role", url.Values{"user_id": {bob}, "role": {"owner"}}, acmePage + "?notice=role-changed",
			"ChangeRole " + acme + " " + bob + " owner", "The role is changed."},
		{acmePage + "/members/remove", url.Values{"user_id": {bob}}, acmePage + "?notice=member-removed",
			"RemoveMember " + acme + " " + bob, "The member is removed"},
		{acmePage + "/delete", url.Values{"confirm": {"yes"}}, "/account?notice=org-deleted",
			"Delete " + acme, "The organization is deleted."},
	} {
		wantRedirect(t, "POST "+c.path, b.submit(t, c.path, c.form), c.to)
		s.wantCalls(t, "POST "+c.path, c.call)
		wantPage(t, "GET "+c.to, b.get(t, c.to), http.StatusOK, c.notice)
	}
}

func testOrgPagesFormProblems(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	b := s.signedIn()
	ada, bob := fakeUser.ID.String(), fakeMember.UserID.String()
	for _, c := range []struct {
		what, path string
		form       url.Values
		status     int
		want       []string
	}{
		{"a bad address", acmePage + "/invite", url.Values{"email": {"nope"}, "role": {"owner"}}, http.StatusBadRequest,
			[]string{"That is not an email address.", `value="nope"`, `aria-describedby="invite-email-hint error" aria-invalid="true"`, `<option value="owner" selected>`}},
		{"a bad role", acmePage + "/invite", url.Values{"email": {"grace@example.com"}, "role": {"boss"}}, http.StatusBadRequest,
			[]string{"A role is owner or member.", `value="grace@example.com"`}},
		{"a member", acmePage + "/invite", url.Values{"email": {"bob@example.com"}, "role": {"member"}}, http.StatusConflict,
			[]string{"That account is a member of the organization already."}},
		{"too many invitations", acmePage + "/invite", url.Values{"email": {"limited@example.com"}, "role": {"member"}}, http.StatusTooManyRequests,
			[]string{"Too many requests. Wait a little, then try again.", `value="limited@example.com"`}},
		{"an owner's form as a member", betaPage + "/invite", url.Values{"email": {"grace@example.com"}, "role": {"member"}}, http.StatusForbidden,
			[]string{"Only the organization&#39;s owners may do that.", "<h1>Beta &lt;b&gt;</h1>"}},
		{"an unknown invitation", acmePage + "/invitations/revoke", url.Values{"invitation_id": {uuid.NewString()}}, http.StatusNotFound,
			[]string{"That member or invitation is not in the organization any more. Nothing was changed."}},
		{"a malformed invitation ID", acmePage + "/invitations/revoke", url.Values{"invitation_id": {"nope"}}, http.StatusNotFound,
			[]string{"That member or invitation is not in the organization any more."}},
		{"demoting the last owner", acmePage + "/members/role", url.Values{"user_id": {ada}, "role": {"member"}}, http.StatusConflict,
			[]string{"The organization&#39;s last owner cannot leave, be removed or stop being an owner."}},
		{"removing the last owner", acmePage + "/members/remove", url.Values{"user_id": {ada}}, http.StatusConflict,
			[]string{"last owner"}},
		{"removing as a member", betaPage + "/members/remove", url.Values{"user_id": {bob}}, http.StatusForbidden,
			[]string{"Only the organization&#39;s owners may do that."}},
		{"deleting without the box", acmePage + "/delete", url.Values{}, http.StatusBadRequest,
			[]string{"Tick the box to say that you mean to delete the organization.", `id="confirm-delete-org" name="confirm" type="checkbox" value="yes" required aria-invalid="true" aria-describedby="error"`}},
		{"deleting as a member", betaPage + "/delete", url.Values{"confirm": {"yes"}}, http.StatusForbidden,
			[]string{"Only the organization&#39;s owners may do that."}},
	} {
		p := b.submit(t, c.path, c.form)
		wantPage(t, c.what, p, c.status, c.want...)
		if c.status == http.StatusTooManyRequests && p.header.Get("Retry-After") != "1801" {
			t.Errorf("%s: Retry-After %q, want 1801", c.what, p.header.Get("Retry-After"))
		}
	}
	// A form of an organization that is not the browser's says there is
	// no such organization.
	for _, path := range []string{"/orgs/" + uuid.NewString() + "/invite", "/orgs/nope/delete"} {
		wantPage(t, "POST "+path, b.submit(t, path, url.Values{"email": {"grace@example.com"}, "role": {"member"}, "confirm": {"yes"}}),
			http.StatusNotFound, "There is no such organization")
	}
	// A form that is no form, or too large, changes nothing.
	wantPage(t, "POST invite as JSON", b.do(t, http.MethodPost, acmePage+"/invite", nil, map[string]string{"Content-Type": "application/json"}),
		http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded")
	wantPage(t, "POST invite too large", b.submit(t, acmePage+"/invite", url.Values{"email": {strings.Repeat("a", 5000)}, "role": {"member"}}),
		http.StatusRequestEntityTooLarge, "too large")
	s.wantCalls(t, "refused forms")

	// Without a session a form goes to sign in, and does nothing.
	wantRedirect(t, "POST invite without a session", newBrowser(s.url).submit(t, acmePage+"/invite", url.Values{"email": {"grace@example.com"}, "role": {"member"}}), "/")
	s.wantCalls(t, "a form without a session")
}

func testOrgPagesLeave(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	b := s.signedIn()
	wantRedirect(t, "POST leave as a member", b.submit(t, betaPage+"/leave", url.Values{}), "/account?notice=org-left")
	s.wantCalls(t, "leave", "RemoveMember "+fakeOtherOrgID.String()+" "+fakeUser.ID.String())
	wantPage(t, "GET /account after leaving", b.get(t, "/account?notice=org-left"), http.StatusOK, "You have left the organization.")
	// Removing oneself is leaving, and goes to the account too.
	wantRedirect(t, "POST remove oneself", b.submit(t, betaPage+"/members/remove", url.Values{"user_id": {fakeUser.ID.String()}}), "/account?notice=org-left")
	s.wantCalls(t, "remove oneself", "RemoveMember "+fakeOtherOrgID.String()+" "+fakeUser.ID.String())
	wantPage(t, "POST leave as the last owner", b.submit(t, acmePage+"/leave", url.Values{}), http.StatusConflict,
		"The organization&#39;s last owner cannot leave", "<h1>Acme</h1>")
	s.wantCalls(t, "the last owner's leave")
}

// testOrgPagesRefuseFormsFromOtherSites: every form of the organizations
// is refused from another site, the acceptance of an invitation too, and
// nothing is done.
func testOrgPagesRefuseFormsFromOtherSites(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	b := s.signedIn()
	forms := map[string]url.Values{
		"/account/orgs":                  {"name": {"Evil"}},
		acmePage + "/invite":             {"email": {"eve@example.com"}, "role": {"owner"}},
		acmePage + "/invitations/revoke": {"invitation_id": {fakeInvitationID.String()}},
		acmePage + "/members/role":       {"user_id": {fakeMember.UserID.String()}, "role": {"owner"}},
		acmePage + "/members/remove":     {"user_id": {fakeMember.UserID.String()}},
		betaPage + "/leave":              {},
		acmePage + "/delete":             {"confirm": {"yes"}},
		"/invitations":                   {"code": {validCode}},
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
	s.wantCalls(t, "forms from other sites")
}

// testOrgPagesInvitationThroughSignIn: the link of an invitation, opened
// without a session, shows what it offers and leads to sign-in as the
// invited address; the sign-in that follows comes back to it, whether
// through the mailed link's page or the code typed in, and its button
// accepts. Opening it uses nothing up.
func testOrgPagesInvitationThroughSignIn(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	b := newBrowser(s.url)
	link := "/invitations?code=" + validCode
	for range 2 {
		p := b.get(t, link)
		wantPage(t, "GET "+link, p, http.StatusOK,
			`<strong id="org-name">Acme</strong> as a member`, `<strong id="invited">`+shown(fakeUser.Email)+`</strong>`,
			`<time datetime="2031-03-11T05:06:07Z">`,
			"<h2>Sign in to accept</h2>", `<form method="post" action="/">`,
			`<input id="email" name="email" type="email" autocomplete="email" spellcheck="false" required value="ada@example.com">`)
		wantLacks(t, "GET "+link+" without a session", p, `action="/invitations"`)
		c := b.cookies["invitation"]
		if c == nil || c.Value != validCode || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure {
			t.Fatalf("GET %s set %v, want the invitation cookie holding the code", link, p.cookies)
		}
		if want := 7 * 24 * 60 * 60; c.MaxAge != want {
			t.Errorf("the invitation cookie's Max-Age is %d, want %d, until the invitation expires", c.MaxAge, want)
		}
	}
	s.wantCalls(t, "opening the link")

	// The sign-in form goes back to the invitation, and forgets it.
	signedIn := b.submit(t, "/sign-in", url.Values{"code": {strings.Repeat("b", 32)}})
	wantRedirect(t, "POST /sign-in", signedIn, link)
	if b.cookies["invitation"] != nil || b.cookies["session"] == nil {
		t.Errorf("POST /sign-in set %v, want the session cookie and the invitation cookie cleared", signedIn.cookies)
	}
	p := b.get(t, link)
	wantPage(t, "GET "+link+" signed in", p, http.StatusOK,
		`<strong id="org-name">Acme</strong>`, `You are signed in as `+shown(fakeUser.Email)+` in this browser.`,
		`<form method="post" action="/invitations">`, `<input id="code" name="code" value="`+validCode+`"`,
		`<button type="submit" data-busy="Joining…">Accept the invitation</button>`)
	wantLacks(t, "GET "+link+" signed in", p, "Sign in to accept", "Accepting needs a session")
	s.wantCalls(t, "opening the link signed in")
	// A later sign-in goes to the account, as it always did.
	wantRedirect(t, "POST /sign-in again", b.submit(t, "/sign-in", url.Values{"code": {strings.Repeat("b", 32)}}), "/account")

	accepted := b.submit(t, "/invitations", url.Values{"code": {validCode}})
	wantRedirect(t, "POST /invitations", accepted, acmePage+"?notice=joined")
	s.wantCalls(t, "POST /invitations", "Accept "+validCode)
}

// testOrgPagesInvitationWithASession: a browser signed in as another
// address is told so, offered no button that could only be refused, and
// offered to sign out instead; one that POSTs anyway is refused, and the
// code still works; one whose session has ended, or that has none, is led
// to sign in.
func testOrgPagesInvitationWithASession(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	b := s.signedIn()
	wrong := "wrong" + validCode[5:]
	p := b.get(t, "/invitations?code="+wrong)
	wantPage(t, "GET an invitation for another address", p, http.StatusOK,
		`<strong id="invited">`+shown("grace@example.com")+`</strong>`,
		`<p class="hint" id="signed-in-as">You are signed in as `+shown(fakeUser.Email)+` in this browser. Accepting needs a session of the invited address: sign out, then sign in as it.`,
		`<form method="post" action="/sign-out">`+"\n"+`<input type="hidden" name="code" value="`+wrong+`">`+"\n"+
			`<button type="submit" data-busy="Signing out…">Sign out</button>`)
	wantLacks(t, "GET an invitation for another address", p, `action="/invitations"`, "Accept the invitation", "Sign in to accept")
	// It is not brought back here by its next sign-ins: the cookie
	// would send whoever signs in next, as any address, to a link
	// that is not theirs, each time until the invitation ends.
	if c := b.cookies["invitation"]; c != nil {
		t.Errorf("a browser signed in as another address was given the invitation cookie")
	}
	b.get(t, "/invitations?code="+validCode)
	if b.cookies["invitation"] != nil {
		t.Errorf("a browser signed in as the invited address was given the invitation cookie")
	}
	p = b.submit(t, "/invitations", url.Values{"code": {wrong}})
	wantPage(t, "POST an invitation for another address", p, http.StatusForbidden,
		"The invitation is for another address.", `<form method="post" action="/sign-out">`, `name="code" value="`+wrong+`"`)
	wantLacks(t, "POST an invitation for another address", p, `action="/invitations"`)
	wantPage(t, "POST an invitation as a member", b.submit(t, "/invitations", url.Values{"code": {"member" + validCode[6:]}}), http.StatusConflict,
		"You are a member of this organization already.")
	wantPage(t, "POST an invitation into a full organization", b.submit(t, "/invitations", url.Values{"code": {"full" + validCode[4:]}}), http.StatusConflict,
		"The organization has as many members as it may hold.")
	s.wantCalls(t, "refused acceptances")

	// Without a session the button leads back to the invitation's page,
	// which leads to sign-in.
	link := "/invitations?code=" + validCode
	wantRedirect(t, "POST /invitations without a session", newBrowser(s.url).submit(t, "/invitations", url.Values{"code": {validCode}}), link)
	b.cookies["session"] = &http.Cookie{Name: "session", Value: "ended"}
	p = b.submit(t, "/invitations", url.Values{"code": {validCode}})
	wantRedirect(t, "POST /invitations with an ended session", p, link)
	if b.cookies["session"] != nil {
		t.Errorf("POST /invitations kept an ended session's cookie: %v", p.cookies)
	}
	b.cookies["session"] = &http.Cookie{Name: "session", Value: "ended"}
	p = b.get(t, link)
	wantPage(t, "GET "+link+" with an ended session", p, http.StatusOK, "Sign in to accept")
	if b.cookies["session"] != nil || b.cookies["invitation"] == nil {
		t.Errorf("GET %s with an ended session set %v, want its cookie cleared and the invitation kept", link, p.cookies)
	}
	s.wantCalls(t, "acceptances without a session")
}

// testOrgPagesInvitationThroughSignOut: the sign-out of an invitation's
// page for another address goes back to it, signed out, where the
// invitation cookie is set, so that the sign-in that follows comes back
// to the invitation too. A sign-out from anywhere else goes to the start,
// and sets no invitation cookie.
func testOrgPagesInvitationThroughSignOut(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	b := s.signedIn()
	wrong := "wrong" + validCode[5:]
	link := "/invitations?code=" + wrong
	b.get(t, link)
	signedOut := b.submit(t, "/sign-out", url.Values{"code": {wrong}})
	wantRedirect(t, "POST /sign-out from an invitation", signedOut, link+"&notice=signed-out")
	if b.cookies["session"] != nil {
		t.Errorf("POST /sign-out from an invitation set %v, want the session cookie cleared", signedOut.cookies)
	}
	p := b.get(t, link+"&notice=signed-out")
	wantPage(t, "GET the invitation after signing out", p, http.StatusOK,
		`<p class="notice" role="status">You have signed out.</p>`, `<strong id="invited">`+shown("grace@example.com")+`</strong>`,
		"<h2>Sign in to accept</h2>", `required value="grace@example.com">`)
	wantLacks(t, "GET the invitation after signing out", p, `action="/sign-out"`, `action="/invitations"`)
	if c := b.cookies["invitation"]; c == nil || c.Value != wrong {
		t.Fatalf("GET the invitation after signing out set %v, want the invitation cookie holding the code", p.cookies)
	}
	wantRedirect(t, "POST /sign-in after signing out", b.submit(t, "/sign-in", url.Values{"code": {strings.Repeat("b", 32)}}), link)
	s.wantCalls(t, "the round trip")

	// Without a session to end, the sign-out of an invitation's page
	// still goes back to it; from the account page it goes to the start.
	wantRedirect(t, "POST /sign-out from an invitation without a session",
		newBrowser(s.url).submit(t, "/sign-out", url.Values{"code": {wrong}}), link+"&notice=signed-out")
	other := s.signedIn()
	p = other.submit(t, "/sign-out", url.Values{})
	wantRedirect(t, "POST /sign-out from the account page", p, "/?notice=signed-out")
	if len(p.cookies) != 1 || p.cookies[0].Name != "session" {
		t.Errorf("POST /sign-out from the account page set %v, want only the session cookie cleared", p.cookies)
	}
	// Where there are no organizations there is no invitation to go back
	// to.
	plain := httptest.NewServer(httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}}))
	t.Cleanup(plain.Close)
	wantRedirect(t, "POST /sign-out with a code and no organizations",
		newBrowser(plain.URL).submit(t, "/sign-out", url.Values{"code": {wrong}}), "/?notice=signed-out")
}

// testOrgPagesInvitationThatDoesNotWork: an unknown, used or expired code
// says so, with no form and without the code, and the page of no code
// asks for one.
func testOrgPagesInvitationThatDoesNotWork(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{})
	for _, b := range []*browser{newBrowser(s.url), s.signedIn()} {
		p := b.get(t, "/invitations?code=not-a-code")
		wantPage(t, "GET a bad invitation", p, http.StatusBadRequest,
			"This link is unknown, used or expired.", "Ask an owner of the organization for a new invitation.", `<a class="action" href="/account">Go to your account</a>`)
		wantNoForm(t, "GET a bad invitation", p, "not-a-code")
		if b.cookies["invitation"] != nil {
			t.Errorf("a bad invitation was kept")
		}
	}
	b := s.signedIn()
	p := b.submit(t, "/invitations", url.Values{"code": {"not-a-code"}})
	wantPage(t, "POST a bad invitation", p, http.StatusBadRequest, "This link is unknown, used or expired.")
	wantNoForm(t, "POST a bad invitation", p, "not-a-code")
	wantPage(t, "GET /invitations", b.get(t, "/invitations"), http.StatusOK,
		`<form method="post" action="/invitations">`, `<input id="code" name="code" value=""`)
	wantPage(t, "GET /invitations with a malformed query", b.get(t, "/invitations?code=%zz"), http.StatusBadRequest, "The request is malformed.")
	s.wantCalls(t, "codes that do not work")
}

// testOrgPagesOutage: while the database is gone the pages say so with
// 503 and Retry-After, and the invitation's form is shown again.
func testOrgPagesOutage(t *testing.T) {
	t.Parallel()
	s := newOrgSite(t, httpapi.Deps{Orgs: unavailableOrgs{}})
	b := s.signedIn()
	for what, p := range map[string]func() page{
		"GET /account":                func() page { return b.get(t, "/account") },
		"GET " + acmePage:             func() page { return b.get(t, acmePage) },
		"POST /account/orgs":          func() page { return b.submit(t, "/account/orgs", url.Values{"name": {"Acme"}}) },
		"GET /invitations":            func() page { return b.get(t, "/invitations?code="+validCode) },
		"POST /invitations":           func() page { return b.submit(t, "/invitations", url.Values{"code": {validCode}}) },
		"POST " + acmePage + "/leave": func() page { return b.submit(t, acmePage+"/leave", url.Values{}) },
	} {
		p := p()
		wantPage(t, what, p, http.StatusServiceUnavailable, "The service is unavailable.")
		if p.header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", what)
		}
	}
	wantPage(t, "GET /invitations in an outage", b.get(t, "/invitations?code="+validCode), http.StatusServiceUnavailable,
		`<input id="code" name="code" value="`+validCode+`"`)
}

// testOrgPagesClientLimit: an organization's page and its forms are
// pages to the client limit, which answers them in HTML.
func testOrgPagesClientLimit(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, Orgs: fakeOrgs{}, RateLimit: 1, Now: func() time.Time { return start }})
	for i, c := range []struct{ method, path string }{
		{"GET", acmePage}, {"POST", acmePage + "/invite"}, {"PUT", acmePage}, {"GET", "/invitations?code=" + validCode}, {"POST", "/account/orgs"},
	} {
		remote := fmt.Sprintf("192.0.2.%d:1000", i+1)
		serve(t, h, c.method, c.path, remote, nil, nil)
		r := serve(t, h, c.method, c.path, remote, nil, nil)
		if r.status != http.StatusTooManyRequests || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s over the limit: %d %s, want a 429 page with Retry-After", c.method, c.path, r.status, r.header.Get("Content-Type"))
		}
	}
}
