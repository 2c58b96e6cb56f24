package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/eventsourced/accounts/internal/smtp/mailbox"
)

// devmail serves SMTP on a loopback address and prints each mail it
// receives, so that the service can be tried with real SMTP on one
// machine: SMTP_URL=smtp://ADDR. It refuses any address that is not
// loopback, since it takes mail from anyone for anyone.
func devmail(ctx context.Context, addr string, stdout, stderr io.Writer) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return &usageError{fmt.Errorf("devmail: --addr %q is not host:port", addr)}
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return &usageError{fmt.Errorf("devmail: --addr %q is not a loopback address: devmail takes mail from anyone, for local use only", addr)}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("devmail: %w", err)
	}
	var mu sync.Mutex
	box := mailbox.New(func(m mailbox.Message) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stdout, "--- mail from %s to %s\nSubject: %s\nMessage-ID: %s\n\n%s\n",
			m.From, strings.Join(m.To, ", "), m.Header.Get("Subject"), m.Header.Get("Message-ID"), strings.TrimRight(m.Text, "\r\n"))
	})
	fmt.Fprintf(stderr, "devmail listening on %s: run the app with SMTP_URL=smtp://%s\n", l.Addr(), l.Addr())
	done := make(chan error, 1)
	go func() { done <- box.Serve(l) }()
	select {
	case <-ctx.Done():
		_ = l.Close()
		_ = box.Close()
		<-done
		return nil
	case err := <-done:
		return fmt.Errorf("devmail: %w", err)
	}
}
