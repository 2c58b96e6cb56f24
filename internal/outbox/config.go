package outbox

import (
	"errors"
	"fmt"
	"time"
)

// RelayConfig tunes a Relay. Zero fields take the defaults shown.
type RelayConfig struct {
	// Interval is the wait between polls once no message is due.
	Interval time.Duration `env:"INTERVAL" envDefault:"1s" desc:"Wait between outbox polls once no message is due."`
	// Lease is how long a claimed message stays claimed. It must outlast
	// Timeout, or a slow delivery can overlap its own retry.
	Lease time.Duration `env:"LEASE" envDefault:"2m" desc:"How long a claimed message stays claimed; must outlast the timeout."`
	// Timeout bounds one handler call.
	Timeout time.Duration `env:"TIMEOUT" envDefault:"30s" desc:"Longest one delivery may take."`
	// Batch is how many messages one claim takes.
	Batch int `env:"BATCH" envDefault:"10" desc:"Messages claimed per poll."`
	// MaxAttempts is how many times a message is tried before it is buried.
	MaxAttempts int `env:"MAX_ATTEMPTS" envDefault:"8" desc:"Deliveries tried before a message is buried."`
}

// The defaults of [RelayConfig], the same as its envDefault tags.
const (
	DefaultInterval    = time.Second
	DefaultLease       = 2 * time.Minute
	DefaultTimeout     = 30 * time.Second
	DefaultBatch       = 10
	DefaultMaxAttempts = 8
)

// SettleTimeout bounds the recording of one delivery's outcome in the store.
// A lease must outlast [RelayConfig.Timeout] by at least this much, so that a
// delivery that ends at its timeout is still settled under its lease.
const SettleTimeout = 10 * time.Second

// WithDefaults returns c with each zero field set to its default.
func (c RelayConfig) WithDefaults() RelayConfig {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	return c
}

// Validate reports every value of c that cannot work, naming each by its
// environment variable. It does not apply defaults: a zero read from the
// environment is an error, not a request for the default.
func (c RelayConfig) Validate() error {
	var errs []error
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("OUTBOX_INTERVAL must be positive, got %s", c.Interval))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("OUTBOX_TIMEOUT must be positive, got %s", c.Timeout))
	}
	if c.Lease < c.Timeout+SettleTimeout {
		errs = append(errs, fmt.Errorf("OUTBOX_LEASE (%s) must be at least OUTBOX_TIMEOUT (%s) plus %s to record the outcome, or a lease can end before its delivery is settled", c.Lease, c.Timeout, SettleTimeout))
	}
	if c.Batch < 1 {
		errs = append(errs, fmt.Errorf("OUTBOX_BATCH must be at least 1, got %d", c.Batch))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("OUTBOX_MAX_ATTEMPTS must be at least 1, got %d", c.MaxAttempts))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("outbox: invalid relay config: %w", err)
	}
	return nil
}
