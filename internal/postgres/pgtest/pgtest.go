// Package pgtest gives each test a fresh, migrated PostgreSQL schema, so that
// tests run in parallel and never see what another test or an earlier run
// left behind.
//
// The server is the one at TEST_DATABASE_URL, by default the local
// PostgreSQL's database "test". A test that cannot reach it fails; it is
// never skipped.
package pgtest

import (
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventsourced/accounts/internal/postgres"
)

// DefaultURL is the server tests use when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the URL of the test server.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// New returns a [postgres.DB] on a fresh, migrated schema, opened with
// opts, closed and dropped when t ends.
func New(t testing.TB, opts ...postgres.Option) *postgres.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, drop, err := postgres.OpenScratch(ctx, URL(), "test_", opts...)
	if err != nil {
		t.Fatalf("pgtest: %v (set TEST_DATABASE_URL to use another server than %s)", err, URL())
	}
	dropAtEnd(t, drop)
	return db
}

// NewURL creates an empty schema, dropped when t ends, and returns a URL
// whose connections use it, for tests of code that opens its own database
// from a URL.
func NewURL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(URL())
	if err != nil {
		t.Fatalf("pgtest: TEST_DATABASE_URL must be a postgres:// URL: %v", err)
	}
	schema := newSchema(ctx, t)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// newSchema creates an empty schema, dropped when t ends, and returns its
// name.
func newSchema(ctx context.Context, t testing.TB) string {
	t.Helper()
	schema, drop, err := postgres.CreateSchema(ctx, URL(), "test_")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dropAtEnd(t, drop)
	return schema
}

// dropAtEnd calls drop when t ends.
func dropAtEnd(t testing.TB, drop func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Error(err)
		}
	})
}

// NewCut is [New] on a database that the test can take away: the DB's
// connections go through a proxy on loopback, and cut closes every one of
// them and refuses new ones from then on, as a server does that went down.
// The schema is created and dropped on connections of their own.
func NewCut(t testing.TB) (db *postgres.DB, cut func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := newSchema(ctx, t)
	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	p := newProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	addr := p.ln.Addr().(*net.TCPAddr)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = addr.IP.String(), uint16(addr.Port)
	cfg.ConnConfig.Fallbacks = nil
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	db, err = postgres.OpenConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return db, p.cut
}

// proxy passes TCP connections on to a server until it is cut.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	isCut bool
}

func newProxy(t testing.TB, server string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &proxy{ln: ln, conns: make(map[net.Conn]struct{})}
	t.Cleanup(p.cut)
	go p.serve(server)
	return p
}

func (p *proxy) serve(server string) {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // cut
		}
		go p.pass(client, server)
	}
}

// pass copies between client and a new connection to server until either
// ends or the proxy is cut.
func (p *proxy) pass(client net.Conn, server string) {
	if !p.track(client) {
		return
	}
	upstream, err := net.Dial("tcp", server)
	if err != nil {
		p.forget(client)
		return
	}
	if !p.track(upstream) {
		p.forget(client)
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, upstream); done <- struct{}{} }()
	<-done
	p.forget(client)
	p.forget(upstream)
}

// track records c for cut, or closes it and reports false once cut.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isCut {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) forget(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	c.Close()
}

// cut closes the listener, so that new connections are refused, and every
// connection passed on.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isCut {
		return
	}
	p.isCut = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}
