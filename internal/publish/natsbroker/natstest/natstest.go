package natstest

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventsourced/accounts/internal/loopback"
)

// startTimeout bounds the wait for a server to say it is ready.
const startTimeout = 30 * time.Second

// Server is a nats-server process of one test.
type Server struct {
	// URL is where the server listens, "nats://127.0.0.1:PORT"; it stays
	// the same across [Server.Stop] and [Server.Start].
	URL string

	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a server for t, stopped when t ends. It fails t when the
// nats-server binary cannot be found or started.
func Start(t testing.TB) *Server {
	t.Helper()
	port, err := loopback.Port() // kept by a restart
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "nats://127.0.0.1:" + strconv.Itoa(port), t: t, port: port, dir: t.TempDir()}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server again after [Server.Stop], on the same port and
// store, and returns once it accepts clients.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("natstest: server already running")
	}
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		s.t.Fatalf("natstest: %v (Debian's package nats-server provides it)", err)
	}
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("natstest: start %s: %v", bin, err)
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	var lines []string
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		started := false
		for sc.Scan() {
			if !started {
				lines = append(lines, sc.Text())
				if strings.Contains(sc.Text(), "Server is ready") {
					close(ready)
					started = true
				}
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case <-ready:
	case <-done:
		s.t.Fatalf("natstest: nats-server exited before it was ready:\n%s", strings.Join(lines, "\n"))
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		<-done
		s.t.Fatalf("natstest: nats-server not ready after %s:\n%s", startTimeout, strings.Join(lines, "\n"))
	}
	s.cmd, s.done = cmd, done
}

// Stop stops the server and waits for it to exit. Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// JetStream connects to the server for t, until t ends, and returns its
// JetStream, for a test to make or read streams as an operator or a
// consumer would.
func (s *Server) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
