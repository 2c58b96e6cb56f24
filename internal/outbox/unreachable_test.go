package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/eventsourced/accounts/internal/outbox"
)

// Unreachable marks the errors of a destination that could not be reached
// at all, wherever they sit in the chain, and leaves every other error as
// it is.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"ConnectionRefused", fmt.Errorf("smtp: send: dial failed: %w", refused), true},
		{"NameDoesNotResolve", &net.DNSError{Err: "no such host", Name: "mail.accounts.invalid", IsNotFound: true}, true},
		{"ReadTimedOut", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"DeadlinePassed", fmt.Errorf("publish: %w", context.DeadlineExceeded), true},
		{"ConnectionReset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, false},
		{"Canceled", fmt.Errorf("publish: %w", context.Canceled), false},
		{"RefusedByTheServer", errors.New("550 5.7.1 relaying denied"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := outbox.Unreachable(tc.err)
			if is := errors.Is(got, outbox.ErrUnreachable); is != tc.want {
				t.Fatalf("Unreachable(%v) wraps ErrUnreachable: %t, want %t", tc.err, is, tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("Unreachable(%v) = %v, which no longer wraps the error", tc.err, got)
			}
			if !tc.want && got != tc.err {
				t.Errorf("Unreachable(%v) = %v, want the error as it was", tc.err, got)
			}
		})
	}
	if outbox.Unreachable(nil) != nil {
		t.Error("Unreachable(nil) is not nil")
	}
	twice := outbox.Unreachable(outbox.Unreachable(refused))
	if n := strings.Count(twice.Error(), outbox.ErrUnreachable.Error()); n != 1 {
		t.Errorf("Unreachable twice says so %d times: %v", n, twice)
	}
}
