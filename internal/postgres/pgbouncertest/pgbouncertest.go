// Package pgbouncertest runs a PgBouncer of a test's own, in session or
// transaction mode, in front of the tests' PostgreSQL, with the stock
// settings that matter (ignore_startup_parameters = extra_float_digits,
// server_reset_query = DISCARD ALL), so that tests go through the pooler
// most production databases stand behind.
//
// The pgbouncer binary comes from the Debian package pgbouncer; a test
// fails, never skips, when it is missing. PgBouncer refuses to run as
// root, so under root it runs as the user postgres (or nobody).
package pgbouncertest

import (
	"bufio"
	"cmp"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/loopback"
	"github.com/eventsourced/accounts/internal/postgres"
)

// Server is a running PgBouncer.
type Server struct {
	// Addr is where it listens, host:port.
	Addr string
	// Mode is its pool_mode.
	Mode postgres.Pooler
}

// startWait bounds the wait for PgBouncer to say it is up.
const startWait = 30 * time.Second

// Start runs PgBouncer in mode, session or transaction, in front of the
// server of target, a postgres:// URL, with every database of that server
// behind it under its own name; it is stopped when t ends.
func Start(t testing.TB, mode postgres.Pooler, target string, opts ...Option) *Server {
	t.Helper()
	if mode != postgres.PoolerSession && mode != postgres.PoolerTransaction {
		t.Fatalf("pgbouncertest: mode must be session or transaction, got %q", mode)
	}
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		// Debian installs it in /usr/sbin, which a user's PATH may lack.
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			t.Fatalf("pgbouncertest: the pgbouncer binary is missing (apt-get install -y pgbouncer): %v", err)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	userName := u.User.Username()
	if userName == "" {
		userName = "postgres"
	}
	port, err := loopback.Port()
	if err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	dir := t.TempDir()
	// Session mode gives each client connection a server connection of
	// its own, as without a pooler; transaction mode shares a few.
	o := options{poolSize: 40}
	if mode == postgres.PoolerTransaction {
		o.poolSize = 8
	}
	for _, opt := range opts {
		opt(&o)
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
ignore_startup_parameters = %s
max_client_conn = 1000
default_pool_size = %d
`, u.Hostname(), cmp.Or(u.Port(), "5432"), port, filepath.Join(dir, "users.txt"), mode,
		strings.Join(append([]string{"extra_float_digits"}, o.ignore...), ","), o.poolSize)
	files := map[string]string{
		"pgbouncer.ini": ini,
		"users.txt":     strconv.Quote(userName) + ` ""` + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatalf("pgbouncertest: %v", err)
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	if os.Geteuid() == 0 {
		if err := runAsOther(cmd, dir); err != nil {
			t.Fatalf("pgbouncertest: %v", err)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("pgbouncertest: start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	up := make(chan struct{})
	var log strings.Builder
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			log.WriteString(line + "\n")
			if !signalled && strings.Contains(line, "process up") {
				signalled = true
				close(up)
			}
		}
	}()
	go func() {
		<-logged
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(startWait):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case <-up:
	case err := <-exited:
		t.Fatalf("pgbouncertest: pgbouncer exited (%v) before it was up:\n%s", err, log.String())
	case <-time.After(startWait):
		t.Fatalf("pgbouncertest: pgbouncer did not say it was up within %s", startWait)
	}
	return &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Mode: mode}
}

// URL returns rawURL, a URL of the server behind s, pointed at s instead.
func (s *Server) URL(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	u.Host = s.Addr
	return u.String()
}

// runAsOther makes cmd run as the user postgres, or nobody, and lets that
// user read dir.
func runAsOther(cmd *exec.Cmd, dir string) error {
	var who *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if who, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("pgbouncer refuses to run as root, and there is no user postgres or nobody to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(who.Uid, 10, 32)
	if err != nil {
		return err
	}
	gid, err := strconv.ParseUint(who.Gid, 10, 32)
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	// t.TempDir makes its folders for the test's user alone.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// Option changes the configuration of a [Server].
type Option func(*options)

type options struct {
	poolSize int
	ignore   []string
}

// PoolSize sets default_pool_size, the server connections of each
// database and user; by default 40 in session mode, 8 in transaction mode.
func PoolSize(n int) Option { return func(o *options) { o.poolSize = n } }

// Ignore adds names to ignore_startup_parameters, after
// extra_float_digits: the pooler then drops those parameters of clients
// instead of refusing them, as some deployments configure it.
func Ignore(names ...string) Option {
	return func(o *options) { o.ignore = append(o.ignore, names...) }
}
