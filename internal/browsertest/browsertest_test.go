package browsertest_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eventsourced/accounts/internal/browsertest"
)

// csp is as strict as the policy of the service's own pages.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// page returns a document that passes axe-core's checks unless body breaks
// them.
func page(title, body string) string {
	return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>` + title + `</title><link rel="stylesheet" href="/style.css"></head>
<body><main><h1>` + title + `</h1>` + body + `</main></body>
</html>`
}

// files are the test server's answers, each sent with the policy csp.
var files = map[string]struct{ typ, body string }{
	"/good": {"text/html", page("Sign in", `
		<form method="post" action="/good">
			<label for="email">Email address</label>
			<input id="email" name="email" type="email" autocomplete="email">
			<button type="submit">Send me a link</button>
		</form>`)},
	"/unlabeled": {"text/html", page("Sign in", `
		<form method="post" action="/unlabeled">
			<input id="email" name="email" type="email">
			<button type="submit">Send me a link</button>
		</form>`)},
	// The state says whether /app.js ran.
	"/script": {"text/html", page("Script", `<p id="state">no script</p><script src="/app.js"></script>`)},
	"/app.js": {"text/javascript", `document.getElementById("state").textContent = "script ran";`},
	// The policy forbids the inline script, so the browser refuses it and
	// logs a violation.
	"/inline":    {"text/html", page("Inline", `<p id="state">no script</p><script>document.getElementById("state").textContent = "inline ran";</script>`)},
	"/errors":    {"text/html", page("Errors", `<p>Errors</p><script src="/errors.js"></script>`)},
	"/errors.js": {"text/javascript", `console.error("boom", 42); throw new Error("kaboom");`},
	"/tall":      {"text/html", page("Tall", `<p class="tall">A page taller than the window</p>`)},
	"/style.css": {"text/css", `.tall { height: 3000px; }`},
	// The icon the browser asks for on its own: a missing one is a
	// console error.
	"/favicon.ico": {"image/png", "\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\x0d\x49\x44\x41\x54\x78\xda\x63\xe0\x0e\xbf\xf0\x1f\x00\x03\xd5\x02\x32\xd8\xa3\x3f\xef\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82"},
}

// server serves files with the policy csp, and, at /hang, an answer that
// never comes before the test ends.
func server(t *testing.T) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		if r.URL.Path == "/hang" {
			select {
			case <-done:
			case <-r.Context().Done():
			}
			return
		}
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", f.typ+"; charset=utf-8")
		fmt.Fprint(w, f.body)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // before srv.Close, which waits for /hang
	return srv
}

// recorder is a testing.TB that keeps the failures of the code under test
// instead of failing the test. On a goroutine of fatal, its Fatal ends the
// goroutine as testing's does; elsewhere, a Fatal is unexpected and fails
// the test.
type recorder struct {
	testing.TB
	own bool // on a goroutine of fatal

	mu       sync.Mutex
	failures []string
	fatal    bool
}

func (r *recorder) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any)                 { r.stop(fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.stop(fmt.Sprintf(format, args...)) }

func (r *recorder) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, s)
}

func (r *recorder) stop(s string) {
	if !r.own {
		r.TB.Helper()
		r.TB.Fatal(s)
	}
	r.record(s)
	r.mu.Lock()
	r.fatal = true
	r.mu.Unlock()
	runtime.Goexit()
}

// text returns what the recorder recorded, one failure a line.
func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.failures, "\n")
}

// fatal runs f with a recorder on a goroutine of its own, so that a Fatal
// ends only f, and returns the recorder once f is done.
func fatal(t *testing.T, f func(tb testing.TB)) *recorder {
	t.Helper()
	r := &recorder{TB: t, own: true}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func state(t *testing.T, ctx context.Context) string {
	t.Helper()
	return browsertest.Run(t, ctx, chromedp.Text(chromedp.ID("state")))
}

func TestScreenshotIsAFullPagePNG(t *testing.T) {
	srv := server(t)
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx, chromedp.Navigate(srv.URL+"/tall"))
	path := browsertest.Screenshot(t, ctx, "tall")
	if filepath.Dir(path) != t.ArtifactDir() || filepath.Base(path) != "tall.png" {
		t.Errorf("path = %s, want tall.png in %s", path, t.ArtifactDir())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s does not start as a PNG: % x", path, b[:min(8, len(b))])
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if cfg.Height < 3000 {
		t.Errorf("screenshot is %dx%d, want the whole page, over 3000 pixels high", cfg.Width, cfg.Height)
	}
}

// TestJavaScript: a tab runs the page's scripts unless the browser was
// started without JavaScript.
func TestJavaScript(t *testing.T) {
	t.Run("runs by default", testJavaScriptRunsByDefault)
	t.Run("off runs no page script", testWithoutJavaScriptNoPageScriptRuns)
}

func testJavaScriptRunsByDefault(t *testing.T) {
	srv := server(t)
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx, chromedp.Navigate(srv.URL+"/script"))
	if got := state(t, ctx); got != "script ran" {
		t.Errorf("state = %q, want the page's script to have run", got)
	}
	tab := browsertest.NewTab(t, ctx)
	browsertest.Do(t, tab, chromedp.Navigate(srv.URL+"/script"))
	if got := state(t, tab); got != "script ran" {
		t.Errorf("state in a new tab = %q, want the page's script to have run", got)
	}
}

func testWithoutJavaScriptNoPageScriptRuns(t *testing.T) {
	srv := server(t)
	ctx := browsertest.New(t, browsertest.WithoutJavaScript())
	browsertest.Do(t, ctx, chromedp.Navigate(srv.URL+"/script"))
	if got := state(t, ctx); got != "no script" {
		t.Fatalf("state = %q, want the page's script not to have run", got)
	}

	// The check turns scripts on for axe-core and off again; what the page
	// skipped stays skipped, and the next page runs none either.
	browsertest.CheckAccessibility(t, ctx)
	if got := state(t, ctx); got != "no script" {
		t.Errorf("state after the accessibility check = %q, want no script", got)
	}
	browsertest.Do(t, ctx, chromedp.Navigate(srv.URL+"/script?again"))
	if got := state(t, ctx); got != "no script" {
		t.Errorf("state after another navigation = %q, want no script", got)
	}

	tab := browsertest.NewTab(t, ctx)
	browsertest.Do(t, tab, chromedp.Navigate(srv.URL+"/script"))
	if got := state(t, tab); got != "no script" {
		t.Errorf("state in a new tab = %q, want no script", got)
	}
}

// TestConsoleErrors: a tab's console errors are collected, and fail the
// test unless it takes them.
func TestConsoleErrors(t *testing.T) {
	t.Run("have CSP violations", testConsoleErrorsHaveCSPViolations)
	t.Run("have calls and exceptions", testConsoleErrorsHaveCallsAndExceptions)
	t.Run("not taken fail the test", testConsoleErrorsNotTakenFailTheTest)
}

func testConsoleErrorsHaveCSPViolations(t *testing.T) {
	srv := server(t)
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx, chromedp.Navigate(srv.URL+"/inline"))
	if got := state(t, ctx); got != "no script" {
		t.Errorf("state = %q, want the policy to have blocked the inline script", got)
	}
	msgs := browsertest.ConsoleErrors(t, ctx)
	if len(msgs) != 1 || msgs[0].Kind != "log/security" || !strings.Contains(msgs[0].Text, "Content Security Policy") {
		t.Errorf("console errors = %q, want one CSP violation", msgs)
	}
	if msgs := browsertest.ConsoleErrors(t, ctx); len(msgs) != 0 {
		t.Errorf("console errors taken twice: %q", msgs)
	}
}

func testConsoleErrorsHaveCallsAndExceptions(t *testing.T) {
	srv := server(t)
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx, chromedp.Navigate(srv.URL+"/errors"))
	msgs := browsertest.ConsoleErrors(t, ctx)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Kind+": "+m.Text)
	}
	want := []string{"console.error: boom 42", "exception: Uncaught Error: kaboom"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("console errors = %q, want %q", got, want)
	}
	for _, m := range msgs {
		if m.URL != srv.URL+"/errors.js" || m.Line != 1 {
			t.Errorf("%v: place = %s:%d, want %s/errors.js:1", m, m.URL, m.Line, srv.URL)
		}
	}
}

func testConsoleErrorsNotTakenFailTheTest(t *testing.T) {
	srv := server(t)
	r := &recorder{TB: t}
	t.Run("page", func(t *testing.T) {
		r.TB = t
		ctx := browsertest.New(r)
		browsertest.Do(t, ctx, chromedp.Navigate(srv.URL+"/inline"))
	})
	// The subtest's cleanup has run.
	if got := r.text(); !strings.Contains(got, "logged 1 console error") || !strings.Contains(got, "Content Security Policy") {
		t.Errorf("failures = %q, want the CSP violation", got)
	}
}

// TestCheckAccessibility: axe-core's check passes a good page and names
// what fails on a bad one.
func TestCheckAccessibility(t *testing.T) {
	t.Run("a good page passes", testGoodPagePasses)
	t.Run("an unlabeled input fails", testUnlabeledInputFailsTheCheck)
}

func testGoodPagePasses(t *testing.T) {
	srv := server(t)
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx, chromedp.Navigate(srv.URL+"/good"))
	v, err := browsertest.Violations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 0 {
		t.Errorf("violations = %+v, want none", v)
	}
	browsertest.CheckAccessibility(t, ctx)
}

// The page has the strict policy too: axe-core runs all the same.
func testUnlabeledInputFailsTheCheck(t *testing.T) {
	srv := server(t)
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx, chromedp.Navigate(srv.URL+"/unlabeled"))
	v, err := browsertest.Violations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var label *browsertest.Violation
	for i := range v {
		if v[i].ID == "label" {
			label = &v[i]
		}
	}
	if label == nil {
		t.Fatalf("violations = %+v, want the rule label", v)
	}
	if label.Impact != "critical" || len(label.Nodes) != 1 || label.Nodes[0].Target != "#email" {
		t.Errorf("violation of label = %+v, want a critical one at #email", *label)
	}

	r := fatal(t, func(tb testing.TB) { browsertest.CheckAccessibility(tb, ctx) })
	got := r.text()
	if r.fatal || !strings.Contains(got, "label (critical): Form elements must have labels") || !strings.Contains(got, "#email: <input") {
		t.Errorf("CheckAccessibility failed with %q, want the rule label at #email", got)
	}
}

// TestFailsNeverSkips: what the package needs and lacks fails the test
// and says how to fix it; a page that hangs fails within the timeout.
func TestFailsNeverSkips(t *testing.T) {
	t.Run("without chromium", testMissingChromiumFails)
	t.Run("without axe-core", testMissingAxeSaysHowToInstallIt)
	t.Run("a hang", testHangFailsWithinTheTimeout)
}

func testMissingChromiumFails(t *testing.T) {
	t.Setenv(browsertest.PathEnv, "no-such-chromium-for-browsertest")
	r := fatal(t, func(tb testing.TB) { browsertest.New(tb) })
	if got := r.text(); !r.fatal || !strings.Contains(got, "Debian's package chromium") {
		t.Errorf("New failed with %q, want a fatal failure naming the package chromium", got)
	}
}

func testMissingAxeSaysHowToInstallIt(t *testing.T) {
	_, err := browsertest.ReadAxe(filepath.Join(t.TempDir(), "axe.min.js"))
	if err == nil || !strings.Contains(err.Error(), "npm ci --prefix internal/browsertest") {
		t.Errorf("error = %v, want the command that installs axe-core", err)
	}
}

func testHangFailsWithinTheTimeout(t *testing.T) {
	srv := server(t)
	ctx := browsertest.New(t, browsertest.Timeout(2*time.Second))
	start := time.Now()
	r := fatal(t, func(tb testing.TB) { browsertest.Do(tb, ctx, chromedp.Navigate(srv.URL+"/hang")) })
	if got := r.text(); !r.fatal || !strings.Contains(got, "not done within 2s") {
		t.Errorf("Do failed with %q, want it to give up after 2s", got)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Do gave up after %s", d)
	}
}
