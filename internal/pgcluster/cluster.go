package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/loopback"
)

// namePrefix starts the name of every cluster this package makes; the
// creating process's ID follows it, so a stale cluster can be told apart.
const namePrefix = "tmp_"

// ErrMissing is returned when postgresql-common's commands are not on
// this machine.
var ErrMissing = errors.New("pgcluster: postgresql-common (pg_createcluster) is not installed")

// Cluster is one throwaway PostgreSQL server.
type Cluster struct {
	// Version is the PostgreSQL major version, such as "15".
	Version string
	// Name is the cluster's name under that version.
	Name string
	// Port is the TCP port it listens on at 127.0.0.1.
	Port int
}

var created atomic.Int64

// Create makes a cluster of the newest installed PostgreSQL version,
// starts it and waits until it accepts connections. Options are set in
// its postgresql.conf, as pg_createcluster's -o does (for example
// "wal_level=logical").
func Create(ctx context.Context, options ...string) (*Cluster, error) {
	if _, err := exec.LookPath("pg_createcluster"); err != nil {
		return nil, ErrMissing
	}
	version, err := newestVersion()
	if err != nil {
		return nil, err
	}
	dropStale(ctx, version)
	// The port stays the cluster's across restarts.
	port, err := loopback.Port()
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{
		Version: version,
		Name:    fmt.Sprintf("%s%d_%d", namePrefix, os.Getpid(), created.Add(1)),
		Port:    port,
	}
	args := []string{c.Version, c.Name, "-p", strconv.Itoa(port), "--start-conf=manual",
		"-o", "listen_addresses=localhost", "-o", "ssl=off", "-o", "fsync=off"}
	for _, o := range options {
		args = append(args, "-o", o)
	}
	args = append(args, "--", "--auth=trust")
	if err := command(ctx, "pg_createcluster", args...); err != nil {
		return nil, fmt.Errorf("pgcluster: create %s: %w", c.Name, err)
	}
	if err := c.Start(ctx); err != nil {
		_ = c.Drop(context.WithoutCancel(ctx))
		return nil, err
	}
	return c, nil
}

// New creates a cluster for t and drops it when t ends. It fails t, never
// skips, when the cluster cannot be made.
func New(t testing.TB, options ...string) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Create(ctx, options...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Drop(ctx); err != nil {
			t.Errorf("pgcluster: %v", err)
		}
	})
	return c
}

// URL returns a connection URL for database on c as user postgres.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, database)
}

// Start starts c and waits until it accepts connections.
func (c *Cluster) Start(ctx context.Context) error {
	if err := c.ctl(ctx, "start"); err != nil {
		return err
	}
	return c.wait(ctx)
}

// Stop shuts c down, fast: sessions are ended, and work they had not
// committed is rolled back.
func (c *Cluster) Stop(ctx context.Context) error { return c.ctl(ctx, "stop", "-m", "fast") }

// Crash stops c at once, as a power cut would: nothing is shut down
// cleanly, and the next start recovers from the write-ahead log.
func (c *Cluster) Crash(ctx context.Context) error { return c.ctl(ctx, "stop", "-m", "immediate") }

// Restart stops c fast and starts it again.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	return c.Start(ctx)
}

// Drop stops c and deletes it with its data.
func (c *Cluster) Drop(ctx context.Context) error {
	if err := command(ctx, "pg_dropcluster", "--stop", c.Version, c.Name); err != nil {
		return fmt.Errorf("pgcluster: drop %s: %w", c.Name, err)
	}
	return nil
}

func (c *Cluster) ctl(ctx context.Context, action string, args ...string) error {
	all := append([]string{"--skip-systemctl-redirect", c.Version, c.Name, action}, args...)
	if err := command(ctx, "pg_ctlcluster", all...); err != nil {
		return fmt.Errorf("pgcluster: %s %s: %w", action, c.Name, err)
	}
	return nil
}

// wait polls until c accepts a connection; a server that is starting
// gives no signal to wait on but its socket.
func (c *Cluster) wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: %s does not accept connections: %w", c.Name, err)
		case <-tick.C:
		}
	}
}

// newestVersion returns the highest PostgreSQL major version installed.
func newestVersion() (string, error) {
	dirs, err := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if err != nil || len(dirs) == 0 {
		return "", ErrMissing
	}
	versions := make([]int, 0, len(dirs))
	for _, d := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(d))))
		if err == nil {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return "", ErrMissing
	}
	sort.Ints(versions)
	return strconv.Itoa(versions[len(versions)-1]), nil
}

// dropStale drops the clusters of this package whose creating process is
// gone.
func dropStale(ctx context.Context, version string) {
	entries, err := os.ReadDir(filepath.Join("/etc/postgresql", version))
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), namePrefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "_", 2)[0])
		if err != nil || alive(pid) {
			continue
		}
		_ = command(ctx, "pg_dropcluster", "--stop", version, e.Name())
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// command runs name with args and returns its output in the error when it
// fails.
func command(ctx context.Context, name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(out.String()))
	}
	return nil
}
