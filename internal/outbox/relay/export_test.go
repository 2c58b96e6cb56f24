package relay

import "time"

// SetAckDelay sets how long r's acknowledgements wait for others to join
// their write, so that a test can make the wait outlast it.
func SetAckDelay(r *Relay, d time.Duration) { r.ackDelay = d }

// SetClaimRetry makes r wait for a failed claim's retry on the channel
// that wait returns for the wait it is given, instead of on a timer.
func SetClaimRetry(r *Relay, wait func(time.Duration) <-chan time.Time) { r.claimRetry = wait }
