package httpapi_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/eventsourced/accounts/internal/browsertest"
	"github.com/eventsourced/accounts/internal/httpapi"
)

// TestOrgPagesInChromium walks the organizations' pages in headless
// Chromium over the fake domains, once with JavaScript and once without:
// open an invitation's link without a session, sign in, come back to it
// and accept it, then see the account's organizations, an owner's and a
// member's page, an invitation refused, and the invitation of another
// address, whose sign-out comes back to it. Every page passes axe-core's
// accessibility check, fits the window and leaves a screenshot in the
// test's artifact directory; a console error, such as a breach of the
// Content-Security-Policy, fails it.
func TestOrgPagesInChromium(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]browsertest.Option{
		"JavaScript":   nil,
		"NoJavaScript": {browsertest.WithoutJavaScript()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newOrgSite(t, httpapi.Deps{})
			ctx := browsertest.New(t, opts...)
			step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
				t.Helper()
				browsertest.Do(t, ctx, actions...)
				browsertest.CheckAccessibility(t, ctx)
				fits := browsertest.Run(t, ctx, chromedp.Evaluate[bool](
					`document.documentElement.scrollWidth <= document.documentElement.clientWidth`))
				if !fits {
					t.Errorf("%s: the page is wider than its window", name)
				}
				browsertest.Screenshot(t, ctx, name)
			}
			at := func(want string) {
				t.Helper()
				u, err := url.Parse(browsertest.Run(t, ctx, chromedp.Location()))
				if err != nil {
					t.Fatal(err)
				}
				if got := u.RequestURI(); got != want {
					t.Errorf("the browser is at %q, want %q", got, want)
				}
			}
			submit := func(form string) chromedp.CSS {
				return chromedp.CSS(`form[action="` + form + `"] button[type="submit"]`)
			}
			link := "/invitations?code=" + validCode

			step("1-invitation-signed-out",
				chromedp.Navigate(s.url+link),
				chromedp.WaitVisible(chromedp.ID("org-name")),
				chromedp.WaitVisible(chromedp.ID("email")))
			step("2-sign-in-link",
				chromedp.Navigate(s.url+"/sign-in?code="+strings.Repeat("b", 32)),
				chromedp.WaitVisible(chromedp.ID("code")))
			step("3-invitation-signed-in",
				chromedp.Click(submit("/sign-in")),
				chromedp.WaitVisible(chromedp.ID("signed-in-as")))
			at(link)
			step("4-joined",
				chromedp.Click(submit("/invitations")),
				chromedp.WaitVisible(chromedp.ID("your-role")))
			at(acmePage + "?notice=joined")
			s.wantCalls(t, "the walk to the invitation", "Accept "+validCode)

			step("5-account",
				chromedp.Navigate(s.url+"/account"),
				chromedp.WaitVisible(chromedp.ID("org-name")))
			step("6-member",
				chromedp.Navigate(s.url+betaPage),
				chromedp.WaitVisible(chromedp.ID("your-role")))
			step("7-owner",
				chromedp.Navigate(s.url+acmePage),
				chromedp.WaitVisible(chromedp.ID("invite-email")))
			step("8-invite-refused",
				chromedp.SendKeys(chromedp.ID("invite-email"), "bob@example.com"),
				chromedp.Click(submit(acmePage+"/invite")),
				chromedp.WaitVisible(chromedp.ID("error")))
			// The refusal is a 409, which the console reports.
			if errs := browsertest.ConsoleErrors(t, ctx); len(errs) != 1 || !strings.Contains(errs[0].String(), "409") {
				t.Errorf("the refused invitation logged %v, want its 409", errs)
			}
			// The invitation of another address offers no button that can
			// only be refused, but a sign-out that comes back to it, and a
			// sign-in from there comes back to it again.
			wrong := "/invitations?code=wrong" + validCode[5:]
			step("9-invitation-of-another-address",
				chromedp.Navigate(s.url+wrong),
				chromedp.WaitVisible(chromedp.ID("signed-in-as")))
			if n := browsertest.Run(t, ctx, chromedp.Evaluate[int](
				`document.querySelectorAll('form[action="/invitations"]').length`)); n != 0 {
				t.Errorf("the invitation of another address has %d forms that accept, want none", n)
			}
			step("10-signed-out-at-invitation",
				chromedp.Click(submit("/sign-out")),
				chromedp.WaitVisible(chromedp.ID("email")))
			at(wrong + "&notice=signed-out")
			step("11-sign-in-link",
				chromedp.Navigate(s.url+"/sign-in?code="+strings.Repeat("b", 32)),
				chromedp.WaitVisible(chromedp.ID("code")))
			step("12-back-at-invitation",
				chromedp.Click(submit("/sign-in")),
				chromedp.WaitVisible(chromedp.ID("signed-in-as")))
			at(wrong)
			s.wantCalls(t, "the walk through sign-out")
		})
	}
}
