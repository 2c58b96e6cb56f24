package mailbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
)

// ErrNotLoopback is an address that others than this machine could reach.
var ErrNotLoopback = errors.New("not a loopback address")

// CheckLoopback returns an error unless addr is host:port with a loopback
// host; one that others could reach wraps [ErrNotLoopback].
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%q is %w", addr, ErrNotLoopback)
	}
	return nil
}

// Catch is a mail catcher for trying the service on one machine: it serves
// SMTP on addr, which must be a loopback address since it takes mail from
// anyone for anyone, until ctx ends, and prints each mail it receives to
// out, with the line endings of a terminal (LF) rather than SMTP's CRLF.
// It says on log where it listens. It returns nil once ctx ends.
func Catch(ctx context.Context, addr string, out, log io.Writer) error {
	if err := CheckLoopback(addr); err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	box := New(func(m Message) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "--- mail from %s to %s\nSubject: %s\nMessage-ID: %s\n\n%s\n",
			m.From, strings.Join(m.To, ", "), m.Header.Get("Subject"), m.Header.Get("Message-ID"),
			strings.ReplaceAll(strings.TrimRight(m.Text, "\r\n"), "\r\n", "\n"))
	})
	fmt.Fprintf(log, "devmail listening on %s: run the app with SMTP_URL=smtp://%s\n", l.Addr(), l.Addr())
	done := make(chan error, 1)
	go func() { done <- box.Serve(l) }()
	select {
	case <-ctx.Done():
		_ = l.Close()
		_ = box.Close()
		<-done
		return nil
	case err := <-done:
		return err
	}
}
