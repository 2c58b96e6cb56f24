package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// natsServer is a nats-server process with JetStream.
type natsServer struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startNATS starts nats-server with JetStream, storing in dir, on a free
// port of loopback, and waits until it says it is ready.
func startNATS(ctx context.Context, dir string) (*natsServer, error) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		return nil, fmt.Errorf("soak: %w (Debian's package nats-server provides it)", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("soak: start nats-server: %w", err)
	}
	ready, done := make(chan struct{}), make(chan struct{})
	var lines []string
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		started := false
		for sc.Scan() {
			if !started {
				lines = append(lines, sc.Text())
				if strings.Contains(sc.Text(), "Server is ready") {
					started = true
					close(ready)
				}
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case <-ready:
		return &natsServer{url: "nats://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: done}, nil
	case <-done:
		return nil, fmt.Errorf("soak: nats-server exited before it was ready:\n%s", strings.Join(lines, "\n"))
	case <-ctx.Done():
	case <-time.After(startTimeout):
	}
	_ = cmd.Process.Kill()
	<-done
	return nil, errors.New("soak: nats-server not ready in time")
}

// stop stops the server with SIGTERM, and kills it after ten seconds.
func (n *natsServer) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
}
