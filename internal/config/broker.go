package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Broker is where BROKER_URL points.
type Broker struct {
	// Kind is "nats" or "kafka"; empty when BROKER_URL is unset.
	Kind string
	// Addrs are the servers: for NATS, URLs as its client takes them,
	// "nats://[user:pass@]host:port"; for Kafka, "host:port".
	Addrs []string
}

// Broker returns where BROKER_URL points, which [Load] has checked.
func (c Config) Broker() Broker {
	b, _ := parseBroker(c.BrokerURL)
	return b
}

// errBrokerURL is the form BROKER_URL must take. Errors about it never
// repeat its value, which may hold a password.
var errBrokerURL = errors.New("BROKER_URL must be nats://host:port[,host:port...] or kafka://host:port[,host:port...]")

// parseBroker parses BROKER_URL: a scheme, then servers separated by
// commas, each of which may repeat the scheme.
func parseBroker(s string) (Broker, error) {
	if s == "" {
		return Broker{}, nil
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || (scheme != "nats" && scheme != "kafka") {
		return Broker{}, fmt.Errorf("%w: the scheme is neither nats nor kafka", errBrokerURL)
	}
	b := Broker{Kind: scheme}
	for i, server := range strings.Split(rest, ",") {
		server = strings.TrimPrefix(strings.TrimSpace(server), scheme+"://")
		u, err := url.Parse(scheme + "://" + server)
		if err != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
			return Broker{}, fmt.Errorf("%w: server %d is not host:port", errBrokerURL, i+1)
		}
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || port == "" {
			return Broker{}, fmt.Errorf("%w: server %d is not host:port", errBrokerURL, i+1)
		}
		switch {
		case scheme == "nats":
			b.Addrs = append(b.Addrs, u.String())
		case u.User != nil:
			return Broker{}, fmt.Errorf("%w: server %d has credentials, which Kafka is not given here", errBrokerURL, i+1)
		default:
			b.Addrs = append(b.Addrs, u.Host)
		}
	}
	return b, nil
}

// subjectPrefix is the form of BROKER_SUBJECT_PREFIX: tokens that are
// valid in NATS subjects and Kafka topic names alike, each ending in a dot.
var subjectPrefix = regexp.MustCompile(`^([A-Za-z0-9_-]+\.)+$`)

func checkSubjectPrefix(p string) error {
	if !subjectPrefix.MatchString(p) {
		return fmt.Errorf("BROKER_SUBJECT_PREFIX must be names of letters, digits, - and _, each followed by a dot, such as %q; got %q", "accounts.", p)
	}
	return nil
}
