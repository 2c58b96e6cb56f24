package relay

import (
	"errors"
	"fmt"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
)

// RetryPolicy says when a relay gives up on a topic's message that keeps
// failing and buries it. A message is buried once it has failed MaxAttempts
// times, or once it fails when it was created longer than MaxAge ago and has
// had at least MinAttempts tries, whichever comes first; a zero MaxAttempts
// or MaxAge sets no such limit, and a policy sets at least one. Between tries
// the message waits [outbox.Backoff], so a policy of age alone keeps trying
// at the backoff ceiling until MaxAge has passed.
//
// Topics without a policy of their own bury after
// [outbox.RelayConfig.MaxAttempts], which suits mail: a link is worth sending
// for minutes. A topic whose destination may be away for hours, a broker or a
// webhook, wants a policy of age ([WithRetryPolicy]); its circuit breaker
// keeps an outage from spending attempts, and its age limit keeps a message
// that nobody will ever take from being tried forever.
//
// The same limits guard against a message that crashes the relay, whose
// tries record no outcome: one claimed more often than MaxAttempts, or
// claimed again more than twice MaxAge after its creation, is buried
// without another try. (A message claimed once its age has passed, but
// within twice that, is given its try: it may have waited for a relay that
// was down, not crashed one.)
type RetryPolicy struct {
	// MaxAttempts is how many failed tries bury a message; zero sets no
	// limit on tries.
	MaxAttempts int
	// MaxAge is how long after its creation a failing message is still
	// retried; zero sets no limit on age.
	MaxAge time.Duration
	// MinAttempts is how many tries a message has before its age can bury
	// it, so that one that waited long before its first try (behind an
	// earlier message of its key, or an open breaker) is still tried
	// that often; zero means one.
	MinAttempts int
}

// Validate reports a policy that cannot work.
func (p RetryPolicy) Validate() error {
	var errs []error
	if p.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("max attempts must not be negative, got %d", p.MaxAttempts))
	}
	if p.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("max age must not be negative, got %s", p.MaxAge))
	}
	if p.MinAttempts < 0 {
		errs = append(errs, fmt.Errorf("min attempts must not be negative, got %d", p.MinAttempts))
	}
	if p.MaxAttempts == 0 && p.MaxAge == 0 {
		errs = append(errs, errors.New("a policy limits attempts, age or both"))
	}
	return errors.Join(errs...)
}

// spent reports whether m, having failed its try, has no try left. It
// reads the clock only for a limit of age.
func (p RetryPolicy) spent(m outbox.Message, now func() time.Time) bool {
	return (p.MaxAttempts > 0 && m.Attempts >= p.MaxAttempts) ||
		(p.MaxAge > 0 && m.Attempts >= max(p.MinAttempts, 1) && now().Sub(m.CreatedAt) >= p.MaxAge)
}

// overclaimed returns why m, claimed at now, must be buried before it is
// tried, or nil: it was claimed more often than the policy allows tries,
// or again more than twice its age after its creation.
func (p RetryPolicy) overclaimed(m outbox.Message, now func() time.Time) error {
	if p.MaxAttempts > 0 && m.Attempts > p.MaxAttempts {
		return fmt.Errorf("%w (%d claims, %d allowed)", errOverclaimed, m.Attempts, p.MaxAttempts)
	}
	if p.MaxAge > 0 && m.Attempts > max(p.MinAttempts, 1) {
		if age := now().Sub(m.CreatedAt); age >= 2*p.MaxAge {
			return fmt.Errorf("%w (claimed again %s after its creation, retried for %s)", errOverclaimed,
				age.Round(time.Second), p.MaxAge)
		}
	}
	return nil
}

// WithRetryPolicy gives topics a retry policy of their own instead of
// [outbox.RelayConfig.MaxAttempts]. [New] reports a policy that cannot work.
func WithRetryPolicy(p RetryPolicy, topics ...string) Option {
	return func(r *Relay) {
		if r.policies == nil {
			r.policies = make(map[string]RetryPolicy)
		}
		for _, t := range topics {
			r.policies[t] = p
		}
	}
}

// policy returns the retry policy of topic.
func (r *Relay) policy(topic string) RetryPolicy {
	if p, ok := r.policies[topic]; ok {
		return p
	}
	return RetryPolicy{MaxAttempts: r.cfg.MaxAttempts}
}
