package outbox

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// ErrUnreachable, wrapped in a [Handler]'s error, says that the message's
// destination could not be reached at all: no connection could be made
// (refused, no route, timed out), its host name did not resolve, or it
// stopped answering. Such a failure speaks of the destination, not of the
// message, so the relay opens the topic's circuit breaker at the first one,
// even while no other message of the topic is failing, and retries the
// message as any failure. A message that reached its destination and was
// refused there counts as the breaker's rule says: the breaker opens only
// once several messages fail in a row. [Unreachable] wraps it around a
// network client's error.
var ErrUnreachable = errors.New("outbox: destination unreachable")

// Unreachable returns err wrapping [ErrUnreachable] when err says that a
// destination on the network could not be reached, and err as it is
// otherwise (nil included). These say so, wherever they are in err's
// chain: a *net.OpError of a dial (a connection refused, a network or host
// unreachable, a connection timed out), a *net.DNSError (the host name did
// not resolve, or the resolver did not answer), and a timeout, a
// [net.Error] whose Timeout reports true (context.DeadlineExceeded is one)
// or [os.ErrDeadlineExceeded]: the destination accepted the connection and
// then did not answer in time. A connection reset, a TLS handshake that
// failed and a context canceled are none of these.
// The handlers of network destinations, the SMTP sender and the
// publishers, pass their clients' errors through it.
func Unreachable(err error) error {
	if err == nil || errors.Is(err, ErrUnreachable) || !unreachable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnreachable, err)
}

// unreachable reports whether err is one of those that [Unreachable]
// marks.
func unreachable(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
