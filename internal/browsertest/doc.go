// Package browsertest runs a headless Chromium for a test, through
// chromedp: it starts Debian's chromium with a profile of the test's own,
// collects the error-level messages of each tab's console (CSP violations
// among them), takes full-page screenshots into the test's artifact
// directory, and checks the page's accessibility with axe-core.
//
// A test needs Debian's package chromium, and axe-core installed by
// `npm ci --prefix internal/browsertest`; it fails, never skips, without
// either. A typical test:
//
//	ctx := browsertest.New(t)
//	browsertest.Do(t, ctx, chromedp.Navigate(srv.URL+"/sign-in"))
//	browsertest.Screenshot(t, ctx, "sign-in")
//	browsertest.CheckAccessibility(t, ctx)
//
// and, at the end of the test, any console error that the test did not take
// with [ConsoleErrors] fails it.
package browsertest
