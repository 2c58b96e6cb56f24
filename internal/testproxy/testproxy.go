package testproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards connections from its own loopback address to a target.
type Proxy struct {
	target string
	l      net.Listener
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// New starts a proxy to target (host:port) and stops it when t ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testproxy: %v", err)
	}
	p := &Proxy{target: target, l: l, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr returns the host:port that clients connect to.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Down cuts every forwarded connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Up forwards new connections again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.forward(c)
	}
}

// forward copies between c and a new connection to the target until either
// closes or the proxy cuts them.
func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var done sync.WaitGroup
	done.Add(2)
	pipe := func(dst, src net.Conn) {
		defer done.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	go pipe(s, c)
	go pipe(c, s)
	done.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

func (p *Proxy) close() {
	_ = p.l.Close()
	p.Down()
	p.wg.Wait()
}
