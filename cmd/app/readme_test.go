package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/eventsourced/accounts/internal/config"
)

// TestReadmeWalkthrough runs the README's "Trying it" section as a person
// would: the app on SQLite with nothing else configured, on a terminal,
// then each curl command in order, with the code taken from the mail the
// app prints on its terminal and the token from the sign-in answer, so
// the README cannot drift from the code. The log holds neither.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	steps := readmeSteps(t)
	if len(steps) == 0 || steps[0] != "go run ./cmd/app" {
		t.Fatalf("the walkthrough must start with `go run ./cmd/app`, got %q", steps)
	}

	dir := t.TempDir()
	logs := &addrLog{seen: make(chan string, 1)}
	screen := openTerminal(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		// As `go run ./cmd/app` with nothing set, but on a free port and
		// with its data in the test's folder rather than ./data.
		done <- run(ctx, nil, getenv(map[string]string{
			"DATABASE_URL": "sqlite:" + filepath.Join(dir, "accounts.db"),
			"HTTP_ADDR":    "127.0.0.1:0",
		}), screen.TTY, logs)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("app: %v", err)
		}
	})
	var addr string
	select {
	case addr = <-logs.seen:
	case err := <-done:
		t.Fatalf("the app stopped before it listened: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the app did not listen within 30s:\n%s", logs.String())
	}

	vars := map[string]string{}
	for _, step := range steps[1:] {
		if !strings.HasPrefix(step, "curl ") {
			t.Fatalf("the walkthrough has a step that is not curl: %q", step)
		}
		req := parseCurl(t, step, addr, vars)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s: %s %s", step, resp.Status, body)
		}
		switch {
		case strings.Contains(step, "/v1/sign-in-links"):
			vars["CODE"] = waitForCode(t, screen)
		case strings.Contains(step, "/v1/sessions"):
			var s struct{ Token string }
			if err := json.Unmarshal(body, &s); err != nil || s.Token == "" {
				t.Fatalf("%s: no token in %s", step, body)
			}
			vars["TOKEN"] = s.Token
		case strings.Contains(step, "-X DELETE") && strings.Contains(step, "/v1/me"):
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("%s: %s, want 204", step, resp.Status)
			}
			vars["DELETED"] = "yes"
		case strings.Contains(step, "/v1/me"):
			var me struct{ Email string }
			if err := json.Unmarshal(body, &me); err != nil || me.Email != "ada@example.com" {
				t.Fatalf("%s: answered %s, want ada@example.com", step, body)
			}
			vars["ME"] = me.Email
		}
	}
	if vars["ME"] == "" || vars["DELETED"] == "" {
		t.Error("the walkthrough never reached GET /v1/me and DELETE /v1/me")
	}
	for _, secret := range []string{vars["CODE"], vars["TOKEN"], "ada@example.com"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs.String())
		}
	}
}

// defaultHost is the host and port that links point at by default:
// BASE_URL's default, which follows HTTP_ADDR's.
func defaultHost(t *testing.T) string {
	t.Helper()
	cfg, err := config.Load(getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(cfg.BaseURL, "http://")
}

// The README, the docs and the compose file give the service's address on
// this machine as the host that links point at by default: a browser keeps
// the session cookie of 127.0.0.1 apart from that of localhost, so a page
// opened at the one is not signed in by a link to the other. And where
// they tell how to serve others, they say to set BASE_URL too.
func TestDocsGiveTheAddressLinksPointAt(t *testing.T) {
	t.Parallel()
	want := defaultHost(t)
	_, port, _ := strings.Cut(want, ":")
	local := regexp.MustCompile(`(localhost|127\.0\.0\.1|\[::1\]):` + port + `\b`)
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range append(docs, "../../README.md", "../../deploy/compose.yaml") {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range local.FindAllString(string(raw), -1) {
			if m != want {
				t.Errorf("%s gives the address %s, want %s, where links point", filepath.Base(file), m, want)
			}
		}
		for _, para := range strings.Split(string(raw), "\n\n") {
			if strings.Contains(para, "HTTP_ADDR=:") && strings.Contains(para, "serves others") && !strings.Contains(para, "BASE_URL") {
				t.Errorf("%s tells how to serve others without BASE_URL:\n%s", filepath.Base(file), para)
			}
		}
	}
}

// TestDocsLinksStayInTheRepository holds README.md and docs/ to what a
// clone has: every link names a file of the repository (and a heading of
// it, when it names one), never another site or a folder beside the
// clone, every test they name by its name exists, and README stays the
// short front door.
func TestDocsLinksStayInTheRepository(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tests := testSources(t, root)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{filepath.Join(root, "README.md")}, docs...)
	for _, file := range files {
		name, _ := filepath.Rel(root, file)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if name == "README.md" {
				if n := strings.Count(string(raw), "\n"); n >= 200 {
					t.Errorf("README.md has %d lines, want under 200: move the detail into docs/", n)
				}
			}
			for _, m := range autolink.FindAllString(string(raw), -1) {
				t.Errorf("%s links to another site: %s", name, m)
			}
			for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
				checkLink(t, root, file, m[1])
			}
			for _, m := range testName.FindAllStringSubmatch(string(raw), -1) {
				checkTestName(t, tests, name, m[1])
			}
		})
	}
}

// testName matches a test named in code spans: `TestX`, or `TestX/Sub`
// for a subtest.
var testName = regexp.MustCompile("`(Test[A-Z][A-Za-z0-9_]*(?:/[A-Za-z0-9_]+)*)`")

// testSources returns the text of every _test.go file under root.
func testSources(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b.Write(raw)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// checkTestName fails t unless the test named, TestX or TestX/Sub/..., is
// declared in tests: a function TestX, and each subtest's name quoted in a
// t.Run.
func checkTestName(t *testing.T, tests, doc, named string) {
	t.Helper()
	parts := strings.Split(named, "/")
	if !strings.Contains(tests, "func "+parts[0]+"(") {
		t.Errorf("%s names %s, a test the repository lacks", doc, named)
		return
	}
	for _, sub := range parts[1:] {
		if !strings.Contains(tests, `t.Run("`+sub+`"`) {
			t.Errorf("%s names %s, whose subtest %q the repository lacks", doc, named, sub)
		}
	}
}

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	autolink = regexp.MustCompile(`<[a-z]+://[^>]*>`)
)

// checkLink fails t unless target, a link of the Markdown file from, names
// a file inside root and, after a #, one of that file's headings.
func checkLink(t *testing.T, root, from, target string) {
	t.Helper()
	name, _ := filepath.Rel(root, from)
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		t.Errorf("%s links to another site: %s", name, target)
		return
	}
	path, frag, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
		if rel, err := filepath.Rel(root, file); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			t.Errorf("%s links outside the repository: %s", name, target)
			return
		}
		if _, err := os.Stat(file); err != nil {
			t.Errorf("%s links to %s, which the repository lacks", name, target)
			return
		}
	}
	if frag == "" {
		return
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Errorf("%s links to %s: %v", name, target, err)
		return
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if h := strings.TrimLeft(line, "#"); h != line && strings.HasPrefix(h, " ") && headingSlug(h) == frag {
			return
		}
	}
	t.Errorf("%s links to %s, a heading that file lacks", name, target)
}

// headingSlug is the anchor GitHub gives a Markdown heading: lower case,
// spaces as hyphens, other punctuation dropped.
func headingSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r == '_':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// readmeSteps returns the commands of the README's "Trying it" section, one
// a line, without comments.
func readmeSteps(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Trying it\n")
	if !ok {
		t.Fatal(`README.md has no "## Trying it" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var steps []string
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "    ") {
			continue
		}
		if cmd := strings.TrimSpace(line); cmd != "" && !strings.HasPrefix(cmd, "#") {
			steps = append(steps, cmd)
		}
	}
	return steps
}

// parseCurl turns a curl command line of the walkthrough into a request to
// addr, with the placeholders in vars filled in.
func parseCurl(t *testing.T, line, addr string, vars map[string]string) *http.Request {
	t.Helper()
	for k, v := range vars {
		line = strings.ReplaceAll(line, k, v)
	}
	words := shellWords(t, line)[1:]
	method, url, body := "", "", ""
	header := http.Header{}
	for i := 0; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-X" || w == "-H" || w == "-d":
			if i+1 == len(words) {
				t.Fatalf("%q: %s wants a value", line, w)
			}
			i++
			switch w {
			case "-X":
				method = words[i]
			case "-H":
				k, v, _ := strings.Cut(words[i], ":")
				header.Add(k, strings.TrimSpace(v))
			case "-d":
				body = words[i]
			}
		case strings.HasPrefix(w, "-"):
			// Output flags such as -i and -s change nothing sent.
		default:
			url = w
		}
	}
	if method == "" {
		method = http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
	}
	rest, ok := strings.CutPrefix(strings.TrimPrefix(url, "http://"), defaultHost(t))
	if !ok {
		t.Fatalf("%q: the URL is not at %s, where the app listens and links point by default", line, defaultHost(t))
	}
	url = addr + rest
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	req.Header = header
	return req
}

// shellWords splits a command line as a POSIX shell would for the quoting
// the walkthrough uses: words split on spaces, single and double quotes.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

var codeOnScreen = regexp.MustCompile(`(?m)^([a-z2-7]{32})\r?$`)

// waitForCode returns the code of the first mail the app printed on its
// terminal.
func waitForCode(t *testing.T, screen *terminal) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := codeOnScreen.FindStringSubmatch(screen.String()); m != nil {
			return m[1]
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("no mail with a code on the terminal within 30s:\n%s", screen.String())
		}
	}
}

// addrLog keeps the app's log and sends the address it listens on once.
type addrLog struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan string
	sent bool
}

var listening = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

func (l *addrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if m := listening.FindSubmatch(l.buf.Bytes()); m != nil && !l.sent {
		l.sent = true
		l.seen <- string(m[1])
	}
	return len(p), nil
}

func (l *addrLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
