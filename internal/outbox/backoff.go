package outbox

import "time"

// Backoff is the wait before retrying a message that failed on its
// attempt-th try: one second, doubling each time, at most five minutes.
func Backoff(attempt int) time.Duration {
	const ceiling = 5 * time.Minute
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 10 {
		return ceiling
	}
	return min(time.Second<<(attempt-1), ceiling)
}
