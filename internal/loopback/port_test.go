package loopback_test

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/loopback"
)

// Each port is free and below the range from which the kernel gives
// outgoing connections their source ports.
func TestPortIsFreeAndNeverASourcePort(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatal(err)
	}
	low, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		p, err := loopback.Port()
		if err != nil {
			t.Fatal(err)
		}
		if p >= low {
			t.Fatalf("port %d is in the ephemeral range, from %d", p, low)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		_ = l.Close()
	}
}
