package loopback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the lowest port Port picks: below it stand the well-known
// and many registered ports of other software.
const lowest = 10000

// rangeFile holds the kernel's ephemeral port range, "low high".
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Port returns a TCP port of 127.0.0.1 that nothing listened on a moment
// ago and that the kernel gives no outgoing connection, so that a server
// may stop and start again on it.
func Port() (int, error) {
	high := ephemeralLow() - 1
	if high <= lowest {
		return 0, errors.New("loopback: the ephemeral port range leaves no room below it")
	}
	var last error
	for range 100 {
		port := lowest + rand.IntN(high-lowest+1)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			last = err
			continue
		}
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("loopback: %w", err)
		}
		return port, nil
	}
	return 0, fmt.Errorf("loopback: no free port below the ephemeral range: %w", last)
}

// ephemeralLow returns the first port of the kernel's ephemeral range,
// or Linux's default when it cannot be read.
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return linuxDefault
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return linuxDefault
	}
	return low
}
