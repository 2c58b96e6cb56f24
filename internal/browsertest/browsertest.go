package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// DefaultTimeout bounds each call of the package, and each action of [Do],
// unless the option [Timeout] gives another bound.
const DefaultTimeout = 30 * time.Second

// StartTimeout bounds the start of the browser and the opening of a tab,
// whatever [Timeout] says: a loaded two-core machine can take many seconds
// to start Chromium, which says nothing about the page under test.
const StartTimeout = 90 * time.Second

// PathEnv names the environment variable that, when set, gives the browser
// binary to run instead of the chromium that exec.LookPath finds.
const PathEnv = "CHROMIUM_PATH"

// config is what the options of [New] set.
type config struct {
	timeout    time.Duration
	javaScript bool
}

// Option changes how [New] sets up the browser.
type Option func(*config)

// WithoutJavaScript turns page scripts off in the browser's tabs, for
// a test of what a page does for a visitor without JavaScript. It sets
// Emulation.setScriptExecutionDisabled on the tab of [New] and on each tab
// of [NewTab] before the tab loads anything; the setting holds across the
// tab's navigations. A tab that a page opens by itself (a link with
// target=_blank) is not covered. Scripts that the test evaluates through
// the DevTools protocol still run, and [Violations] turns page scripts on
// for the time of its check, because axe-core needs timers.
func WithoutJavaScript() Option {
	return func(c *config) { c.javaScript = false }
}

// Timeout sets the bound of each call of the package, and of each action of
// [Do], in place of [DefaultTimeout]. The browser's start has a bound of
// its own, [StartTimeout].
func Timeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// tab is what the package keeps of one tab, in the context that [New] and
// [NewTab] return.
type tab struct {
	cfg config

	mu       sync.Mutex
	messages []Message // error-level messages not yet taken by ConsoleErrors
}

type tabKey struct{}

// tabOf returns the tab of ctx, or nil when ctx did not come from [New] or
// [NewTab].
func tabOf(ctx context.Context) *tab {
	tb, _ := ctx.Value(tabKey{}).(*tab)
	return tb
}

// timeoutOf returns the bound of one call on ctx.
func timeoutOf(ctx context.Context) time.Duration {
	if tb := tabOf(ctx); tb != nil {
		return tb.cfg.timeout
	}
	return DefaultTimeout
}

// New starts a headless chromium for t and returns the chromedp context of
// its first tab, for chromedp.Run and chromedp.Do or for [Do]. The browser
// has a fresh profile in t.TempDir() and ends when t ends. New fails t when
// the binary is missing (Debian's package chromium provides it; the
// environment variable CHROMIUM_PATH may name another) or when the browser
// does not start within [StartTimeout].
//
// The returned context has no deadline of its own: bound the test's own
// chromedp calls, or make them through [Do], which does. At t's end each
// error-level console message of the tab that [ConsoleErrors] did not take
// fails t.
func New(t testing.TB, opts ...Option) context.Context {
	t.Helper()
	cfg := config{timeout: DefaultTimeout, javaScript: true}
	for _, o := range opts {
		o(&cfg)
	}
	bin, err := chromiumPath()
	if err != nil {
		t.Fatalf("browsertest: %v (Debian's package chromium provides it: apt-get install -y chromium)", err)
	}
	// The profile directory comes before the browser's cleanup, so that it
	// is removed after the browser exits.
	profile := t.TempDir()
	var output lockedBuffer
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(profile),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root
		chromedp.NoFirstRun,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// The pages under test are on loopback: no other name resolves, so
		// nothing that the browser does on its own leaves the machine.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1, EXCLUDE ::1"),
		chromedp.CombinedOutput(&output),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), allocOpts...)
	ctx, cancelTab, tb, err := openTab(allocCtx, cfg)
	if err != nil {
		cancelAlloc()
		t.Fatalf("browsertest: start %s: %v\nbrowser output:\n%s", bin, err, output.String())
	}
	t.Cleanup(func() {
		tb.reportLeft(t, ctx)
		// The first tab's context owns the browser: closing it gracefully
		// ends the browser, and cancelAlloc waits for its process.
		cctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
		if err := chromedp.Cancel(cctx); err != nil {
			t.Logf("browsertest: close the browser: %v", err)
		}
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// NewTab opens another tab in the browser of ctx, a context from [New], with
// the same options, and returns its chromedp context. The tab closes when t
// ends, and its console errors are checked then as those of New's tab are.
func NewTab(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	parent := tabOf(ctx)
	if parent == nil {
		t.Fatal("browsertest: NewTab needs a context from browsertest.New")
	}
	tabCtx, cancelTab, tb, err := openTab(ctx, parent.cfg)
	if err != nil {
		t.Fatalf("browsertest: open a tab: %v", err)
	}
	t.Cleanup(func() {
		tb.reportLeft(t, tabCtx)
		cctx, cancel := context.WithTimeout(tabCtx, parent.cfg.timeout)
		defer cancel()
		if err := chromedp.Cancel(cctx); err != nil {
			t.Logf("browsertest: close a tab: %v", err)
		}
		cancelTab()
	})
	return tabCtx
}

// openTab makes a chromedp context under parent, attaches its tab (starting
// the browser when parent has none) within [StartTimeout], and turns scripts
// off when cfg says so. The cancel func ends the context; the first tab's
// context owns the browser.
func openTab(parent context.Context, cfg config) (context.Context, context.CancelFunc, *tab, error) {
	tb := &tab{cfg: cfg}
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithListener(tb.listen))
	ctx = context.WithValue(ctx, tabKey{}, tb)
	if err := attach(ctx, StartTimeout); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	if !cfg.javaScript {
		if err := setScripts(ctx, false); err != nil {
			cancel()
			return nil, nil, nil, err
		}
	}
	return ctx, cancel, tb, nil
}

// attach runs chromedp's first action on ctx, which starts the browser or
// opens the tab, and gives up after d. The first action binds the
// browser's life to the context it gets, so that context cannot carry the
// deadline; the caller cancels ctx after an error.
func attach(ctx context.Context, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(ctx) }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("attach to the tab: %w", err)
		}
		return nil
	case <-timer.C:
		return fmt.Errorf("the browser gave no tab within %s", d)
	}
}

// setScripts turns the page scripts of ctx's tab on or off.
func setScripts(ctx context.Context, on bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(ctx))
	defer cancel()
	_, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !on})
	if err != nil && on {
		return fmt.Errorf("turn page scripts on: %w", err)
	}
	if err != nil {
		return fmt.Errorf("turn page scripts off: %w", err)
	}
	return nil
}

// Do runs the chromedp actions on ctx in order, within the timeout of one
// call, and fails t at the first error.
func Do(t testing.TB, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	d := timeoutOf(ctx)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("browsertest: actions not done within %s: %v", d, err)
		}
		t.Fatalf("browsertest: %v", err)
	}
}

// Run runs the chromedp action on ctx within the timeout of one call and
// returns its value, such as the text of chromedp.Text; it fails t when the
// action fails.
func Run[T any](t testing.TB, ctx context.Context, action chromedp.Action[T]) T {
	t.Helper()
	d := timeoutOf(ctx)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("browsertest: action not done within %s: %v", d, err)
		}
		t.Fatalf("browsertest: %v", err)
	}
	return v
}

// chromiumPath returns the browser binary: the one that CHROMIUM_PATH
// names, or else chromium on the PATH.
func chromiumPath() (string, error) {
	name := "chromium"
	if p := os.Getenv(PathEnv); p != "" {
		name = p
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("find the browser: %w", err)
	}
	return bin, nil
}

// lockedBuffer is a buffer that the browser's output goroutine writes while
// the test may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
