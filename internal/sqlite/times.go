package sqlite

import "time"

// The package stores each time as an INTEGER of microseconds since
// 1970-01-01 UTC, which sorts and compares as the times do.

// micros returns t as stored: microseconds since 1970-01-01 UTC.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros returns the time stored as us, in UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }
