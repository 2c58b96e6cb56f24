package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eventsourced/accounts/internal/loopback"
)

// startTimeout bounds the wait for a process to be ready.
const startTimeout = 2 * time.Minute

// instance is one app process, started again on the same port after each
// kill.
type instance struct {
	index int
	url   string
	env   []string
	cfg   Config
	log   string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// baseEnv is what the processes inherit of the soak's environment: enough
// to run, none of the app's own variables.
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "GORACE", "GOCOVERDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func (s *soak) newInstance(i int) (*instance, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := append(baseEnv(), s.cfg.Env...)
	env = append(env,
		"HTTP_ADDR="+addr,
		"BASE_URL=http://soak.test",
		"DATABASE_URL="+s.cluster.URL("postgres"),
		"DATA_KEY="+s.dataKey,
		"SMTP_URL="+s.mail.url,
		"BROKER_URL="+s.nats.url,
		"HTTP_RATE_LIMIT=0",
		"OUTBOX_TIMEOUT=10s",
		"OUTBOX_LEASE="+s.cfg.Lease.String(),
		"LOG_LEVEL=WARN",
	)
	return &instance{index: i, url: "http://" + addr, env: env, cfg: s.cfg,
		log: filepath.Join(s.dir, fmt.Sprintf("instance-%d.log", i))}, nil
}

// start starts the process and waits until /readyz answers 200.
func (in *instance) start(ctx context.Context) error {
	f, err := os.OpenFile(in.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	defer f.Close()
	fmt.Fprintf(f, "--- start %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(in.cfg.Binary, "serve")
	cmd.Env = in.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("soak: start instance %d: %w", in.index, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	in.mu.Lock()
	in.cmd, in.done = cmd, done
	in.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.url+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("soak: instance %d exited before it was ready (log: %s)", in.index, in.log)
		case <-ctx.Done():
			return fmt.Errorf("soak: instance %d not ready after %s (log: %s)", in.index, startTimeout, in.log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (in *instance) running() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.done == nil {
		return false
	}
	select {
	case <-in.done:
		return false
	default:
		return true
	}
}

// pid is the process's ID, 0 when it is not running.
func (in *instance) pid() int {
	if !in.running() {
		return 0
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.cmd.Process.Pid
}

// kill sends SIGKILL and waits for the process to end.
func (in *instance) kill() {
	in.mu.Lock()
	cmd, done := in.cmd, in.done
	in.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop asks the process to stop, and kills it if it has not within 30s.
func (in *instance) stop() {
	in.mu.Lock()
	cmd, done := in.cmd, in.done
	in.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		in.kill()
	}
}

// rss is the resident memory of the process in bytes, 0 when it is not
// running.
func (in *instance) rss() int64 {
	pid := in.pid()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// newDataKey runs `app keys new`.
func newDataKey(ctx context.Context, cfg Config) (string, error) {
	cmd := exec.CommandContext(ctx, cfg.Binary, "keys", "new")
	cmd.Env = append(baseEnv(), cfg.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("soak: %s keys new: %w: %s", cfg.Binary, err, strings.TrimSpace(stderr.String()))
	}
	key := strings.TrimSpace(string(out))
	if key == "" || strings.ContainsAny(key, " \n") {
		return "", fmt.Errorf("soak: %s keys new printed %q, not one key", cfg.Binary, key)
	}
	return key, nil
}

// freePort returns a port that an instance or server killed and started
// again keeps.
func freePort() (int, error) {
	port, err := loopback.Port()
	if err != nil {
		return 0, fmt.Errorf("soak: %w", err)
	}
	return port, nil
}

// projectionsCaughtUp runs `app projections status` until every projection
// is running and behind by no event, for at most wait; it returns what the
// last run printed when that did not happen.
func projectionsCaughtUp(ctx context.Context, cfg Config, databaseURL string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		cmd := exec.CommandContext(ctx, cfg.Binary, "projections", "status")
		cmd.Env = append(append(baseEnv(), cfg.Env...), "DATABASE_URL="+databaseURL, "LOG_LEVEL=WARN")
		out, err := cmd.CombinedOutput()
		// A table: PROJECTION VERSION BEHIND LAG STATE, a row each.
		rows := strings.Split(strings.TrimSpace(string(out)), "\n")[1:]
		if err == nil && len(rows) == 0 {
			err = errors.New("no projection listed")
		}
		if err == nil {
			for _, row := range rows {
				if f := strings.Fields(row); len(f) != 5 || f[2] != "0" || f[4] != "running" {
					err = errors.New("not caught up")
				}
			}
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("projections not caught up and running %s after the load stopped (%v): %s", wait, err, strings.TrimSpace(string(out)))
		}
		if err := pause(ctx, time.Second); err != nil {
			return err
		}
	}
}
