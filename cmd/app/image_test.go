package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// dockerfile is the image definition, at the top of the repository.
const dockerfile = "../../Dockerfile"

// dockerfileLines returns the instructions of the Dockerfile, each on one
// line (continuations joined), without comments.
func dockerfileLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	cur := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") {
			continue
		}
		if rest, ok := strings.CutSuffix(l, "\\"); ok {
			cur += rest + " "
			continue
		}
		if l = cur + l; l != "" {
			lines = append(lines, l)
		}
		cur = ""
	}
	return lines
}

// The final stage of the image is distroless's static image (or scratch),
// runs as a user that is not root, listens on every interface, and starts
// the binary the build stage made.
func TestDockerfileFinalStage(t *testing.T) {
	t.Parallel()
	lines := dockerfileLines(t)
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			last = i
		}
	}
	if last < 0 {
		t.Fatal("the Dockerfile has no FROM")
	}
	final := lines[last:]
	if from := final[0]; !strings.HasPrefix(from, "FROM gcr.io/distroless/static") && from != "FROM scratch" {
		t.Errorf("final stage %q, want distroless static or scratch", from)
	}
	want := map[string]*regexp.Regexp{
		"a user that is not root":       regexp.MustCompile(`^USER ([1-9]\d*|nonroot)(:\d+)?$`),
		"the public address":            regexp.MustCompile(`^ENV HTTP_ADDR=:8080$`),
		"the collector's target":        regexp.MustCompile(`^ENV GOGC=[1-9]\d*$`),
		"the binary as entry point":     regexp.MustCompile(`^ENTRYPOINT \["/app"\]$`),
		"the binary of the build stage": regexp.MustCompile(`^COPY --from=build /out/app /app$`),
	}
	for what, re := range want {
		found := false
		for _, l := range final {
			found = found || re.MatchString(l)
		}
		if !found {
			t.Errorf("the final stage lacks %s (%s)", what, re)
		}
	}
}

// imageBuild runs the Dockerfile's build command, as it is written there,
// with version and revision for its build arguments, and returns the
// binary it made.
func imageBuild(t *testing.T, version, revision string) string {
	t.Helper()
	var build string
	for _, l := range dockerfileLines(t) {
		if cmd, ok := strings.CutPrefix(l, "RUN "); ok && strings.Contains(cmd, "go build") {
			if build != "" {
				t.Fatal("the Dockerfile has two go build commands")
			}
			build = cmd
		}
	}
	for _, want := range []string{"CGO_ENABLED=0 ", "-o /out/app ", "./cmd/app", "${VERSION}", "${REVISION}"} {
		if !strings.Contains(build, want) {
			t.Fatalf("the Dockerfile's build command %q lacks %q", build, want)
		}
	}
	out := filepath.Join(t.TempDir(), "app")
	build = strings.ReplaceAll(build, "-o /out/app ", "-o "+out+" ")
	cmd := exec.Command("sh", "-c", build)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "VERSION="+version, "REVISION="+revision)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, b)
	}
	return out
}

// The image holds nothing but the binary, a CA bundle and a user: the
// binary must be static and serve from a root directory that holds only
// itself, a /tmp and its working folder, as a user that is not root. This
// builds it with the Dockerfile's own command, checks it has no dynamic
// loader, runs `app version`, then `app serve` in such a chroot: /healthz,
// `app healthcheck`, a sign-in from the code of the mail it prints on its
// terminal, and an exit 0 on SIGTERM, after which the health check fails.
func TestImageBinaryServesFromAnEmptyRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test chroots, which needs root (as the CI runs)")
	}
	bin := imageBuild(t, "v9.8.7-test", "0123456789abcdef")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary asks for a dynamic loader; the image has none")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v; the image has none", libs)
	}
	f.Close()

	root := t.TempDir()
	const user = 65532 // distroless's nonroot
	for _, dir := range []string{"tmp", "var/lib/accounts"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(root, "var/lib/accounts"), user, user); err != nil {
		t.Fatal(err)
	}
	// The chroot is made as root; from then on the user needs only to
	// enter the new root.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "app"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	inRoot := func(args ...string) *exec.Cmd {
		cmd := exec.Command("/app", args...)
		cmd.Dir = "/var/lib/accounts"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: user, Gid: user}}
		return cmd
	}

	v := inRoot("version")
	v.Env = []string{}
	out, err := v.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "app v9.8.7-test 0123456789abcdef") {
		t.Errorf("app version in the image: %q, %v; want the version and revision stamped in", out, err)
	}

	const grace = 10 * time.Second
	serve := inRoot("serve")
	serve.Env = []string{"HTTP_ADDR=127.0.0.1:0", "SHUTDOWN_GRACE=" + grace.String()}
	screen := openTerminal(t)
	serve.Stdout = screen.TTY
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var logs strings.Builder
	var logsMu sync.Mutex
	listening := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			l := s.Text()
			logsMu.Lock()
			logs.WriteString(l + "\n")
			logsMu.Unlock()
			if m := e2eListening.FindStringSubmatch(l); m != nil {
				listening <- m[1]
			}
		}
		exited <- serve.Wait()
	}()
	t.Cleanup(func() {
		_ = serve.Process.Kill()
		if t.Failed() {
			logsMu.Lock()
			t.Logf("app logs:\n%s", logs.String())
			logsMu.Unlock()
		}
	})
	var base string
	select {
	case addr := <-listening:
		base = "http://" + addr
	case err := <-exited:
		t.Fatalf("app serve in the empty root ended before it listened: %v", err)
	case <-time.After(e2eWait):
		t.Fatal("app serve in the empty root did not listen")
	}
	client := &http.Client{Timeout: e2eWait}
	call := func(method, path, body string, want int) []byte {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, got, want)
		}
		return got
	}
	call("GET", "/healthz", "", http.StatusOK)
	call("GET", "/readyz", "", http.StatusOK)
	// The image's health check: app healthcheck, with no shell or curl.
	healthcheck := func() ([]byte, error) {
		hc := inRoot("healthcheck")
		hc.Env = []string{"HTTP_ADDR=" + strings.TrimPrefix(base, "http://")}
		return hc.CombinedOutput()
	}
	if out, err := healthcheck(); err != nil || !strings.Contains(string(out), "/readyz: 200 OK") {
		t.Errorf("app healthcheck in the image: %q, %v; want /readyz answered 200", out, err)
	}
	call("POST", "/v1/sign-in-links", `{"email":"ada@example.com"}`, http.StatusAccepted)
	code := waitForCode(t, screen)
	var session struct {
		Token string `json:"token"`
		User  struct {
			Email string `json:"email"`
		} `json:"user"`
	}
	if err := json.Unmarshal(call("POST", "/v1/sessions", fmt.Sprintf(`{"code":%q}`, code), http.StatusCreated), &session); err != nil {
		t.Fatal(err)
	}
	if session.Token == "" || session.User.Email != "ada@example.com" {
		t.Errorf("sign-in: %+v, want a token for ada@example.com", session)
	}
	logsMu.Lock()
	if strings.Contains(logs.String(), code) {
		t.Error("the log holds the code, which only the terminal may show")
	}
	logsMu.Unlock()

	start := time.Now()
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit 0", err)
		}
		if took := time.Since(start); took > grace {
			t.Errorf("the stop took %s, more than SHUTDOWN_GRACE (%s)", took, grace)
		}
		if out, err := healthcheck(); err == nil {
			t.Errorf("app healthcheck in the image once the app has stopped: %q, want a failure", out)
		}
	case <-time.After(grace + e2eWait):
		t.Fatalf("app serve did not exit within %s of SIGTERM", grace+e2eWait)
	}
}
