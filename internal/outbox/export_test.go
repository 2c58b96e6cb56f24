package outbox

import "time"

// SetAckDelay sets how long r's acknowledgements wait for others to join
// their write, so that a test can make the wait outlast it.
func SetAckDelay(r *Relay, d time.Duration) { r.ackDelay = d }
