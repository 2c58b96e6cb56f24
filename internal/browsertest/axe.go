package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// AxeTags are the axe-core tags whose rules [Violations] runs: WCAG 2.0 and
// 2.1 at levels A and AA, and axe's best practices.
var AxeTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"}

// Violation is an axe-core rule that the page breaks.
type Violation struct {
	// ID names the rule, such as "label" or "color-contrast".
	ID string `json:"id"`
	// Impact is axe's weight of the violation: "minor", "moderate",
	// "serious" or "critical".
	Impact string `json:"impact"`
	// Help says in a sentence what the rule asks, and HelpURL explains it.
	Help    string `json:"help"`
	HelpURL string `json:"helpUrl"`
	// Nodes are the elements that break the rule.
	Nodes []ViolationNode `json:"nodes"`
}

// ViolationNode is one element that breaks the rule of a [Violation].
type ViolationNode struct {
	// Target is axe's CSS selector of the element; a step into a shadow
	// root is written " >>> ".
	Target string `json:"target"`
	// HTML is the element's opening tag as axe shows it.
	HTML string `json:"html"`
}

// axeResult is what the script of runAxe returns.
type axeResult struct {
	URL        string      `json:"url"`
	Violations []Violation `json:"violations"`
}

// axeRun is the expression that runs axe-core on the document and returns
// an axeResult; %s is the JSON of AxeTags. The content of iframes is not
// checked: that would need axe in each frame.
const axeRun = `(async () => {
	const r = await axe.run(document, {
		runOnly: {type: "tag", values: %s},
		resultTypes: ["violations"],
		iframes: false,
	});
	return {
		url: document.location.href,
		violations: r.violations.map(v => ({
			id: v.id, impact: v.impact || "", help: v.help, helpUrl: v.helpUrl,
			nodes: v.nodes.map(n => ({
				target: n.target.map(s => [].concat(s).join(" >>> ")).join(" "),
				html: n.html,
			})),
		})),
	};
})()`

// Violations runs axe-core in the page of ctx's tab and returns the rules of
// [AxeTags] that the page breaks, none when it passes. It evaluates axe's
// script through the DevTools protocol, to which the page's
// Content-Security-Policy does not apply. In a tab of [WithoutJavaScript] it
// turns page scripts on for the check and off again after it: scripts that
// the page skipped while it loaded stay skipped. Violations gives up after
// the timeout of one call.
func Violations(ctx context.Context) ([]Violation, error) {
	r, err := runAxe(ctx)
	if err != nil {
		return nil, err
	}
	return r.Violations, nil
}

// runAxe is Violations with the page's address.
func runAxe(ctx context.Context) (res axeResult, err error) {
	src, err := axeSource()
	if err != nil {
		return axeResult{}, err
	}
	if tb := tabOf(ctx); tb != nil && !tb.cfg.javaScript {
		// axe-core waits on timers, which run only with page scripts on.
		if err := setScripts(ctx, true); err != nil {
			return axeResult{}, fmt.Errorf("axe-core: %w", err)
		}
		defer func() {
			// Off again even when the check ran out of time.
			if e := setScripts(context.WithoutCancel(ctx), false); e != nil {
				err = errors.Join(err, fmt.Errorf("axe-core: %w", e))
			}
		}()
	}
	d := timeoutOf(ctx)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof axe === "object" && typeof axe.run === "function"`))
	if err != nil {
		return axeResult{}, fmt.Errorf("axe-core: look for it in the page: %w", err)
	}
	if !loaded {
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](string(src))); err != nil {
			return axeResult{}, fmt.Errorf("axe-core: load it into the page: %w", err)
		}
	}
	tags := `["` + strings.Join(AxeTags, `","`) + `"]`
	res, err = chromedp.Run(ctx, chromedp.Evaluate[axeResult](fmt.Sprintf(axeRun, tags), chromedp.EvalAwaitPromise))
	if errors.Is(err, context.DeadlineExceeded) {
		return axeResult{}, fmt.Errorf("axe-core: no result within %s: %w", d, err)
	}
	if err != nil {
		return axeResult{}, fmt.Errorf("axe-core: run: %w", err)
	}
	return res, nil
}

// CheckAccessibility runs axe-core in the page of ctx's tab, as [Violations]
// does, and fails t with each rule that the page breaks: its id, impact and
// help, and the selector and tag of each element that breaks it. It fails t
// at once when the check cannot run.
func CheckAccessibility(t testing.TB, ctx context.Context) {
	t.Helper()
	r, err := runAxe(ctx)
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	if len(r.Violations) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "browsertest: %s breaks %d accessibility rule(s) of axe-core (%s):", r.URL, len(r.Violations), strings.Join(AxeTags, ", "))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "\n\t%s (%s): %s <%s>", v.ID, v.Impact, v.Help, v.HelpURL)
		for _, n := range v.Nodes {
			fmt.Fprintf(&b, "\n\t\t%s: %s", n.Target, n.HTML)
		}
	}
	t.Error(b.String())
}

// axeFile is where `npm ci --prefix internal/browsertest` puts axe-core,
// from the package's directory.
var axeFile = filepath.Join("node_modules", "axe-core", "axe.min.js")

// axeSource reads axe-core's script once for the test binary.
var axeSource = sync.OnceValues(func() ([]byte, error) {
	dir, err := packageDir()
	if err != nil {
		return nil, fmt.Errorf("axe-core: %w", err)
	}
	return readAxe(filepath.Join(dir, axeFile))
})

// readAxe reads axe-core's script from path and says how to install it
// when it is missing.
func readAxe(path string) ([]byte, error) {
	src, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("axe-core is not installed (%w): run `npm ci --prefix internal/browsertest` in the module's root", err)
	}
	if err != nil {
		return nil, fmt.Errorf("axe-core: %w", err)
	}
	return src, nil
}

// packageDir returns the directory of this package's source: the one that
// the compiler recorded, or, in a build with -trimpath, where records no
// absolute path, internal/browsertest under the module root above the
// working directory, which go test sets to the tested package's directory.
func packageDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if ok && filepath.IsAbs(file) {
		return filepath.Dir(file), nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the package's directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "internal", "browsertest"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the package's directory: no go.mod above the working directory")
		}
		dir = parent
	}
}
