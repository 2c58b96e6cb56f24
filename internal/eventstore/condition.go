package eventstore

import (
	"fmt"
	"time"
)

// Condition is what [Store.AppendLaterIf] requires of a stream's recent
// events, the stretch after its last event recorded before Since, as
// [Store.LoadSince] returns them, in place of an expected version: fewer than Fewer of them are of the types
// Counted, and none is of the types Absent. It is a conditional write,
// as DynamoDB's condition expressions are, cut to what a limit over a
// window of time needs: a command that allows a few events per window
// states the limit as a Condition and appends without reading the
// stream, and the store checks it in the same statement as the append.
//
// The zero Condition is invalid: Fewer must be at least 1. Fewer 1 with
// no types requires that the stream has no event recorded since Since.
type Condition struct {
	// Since begins the stretch of the stream the condition looks at, as
	// it begins the one [Store.LoadSince] returns, compared exactly.
	Since time.Time
	// Fewer bounds the recent events of the types Counted.
	Fewer int
	// Counted names the types Fewer counts; none counts every event.
	Counted []string
	// Absent names types of which the stream may have no recent event,
	// however few it has: types whose one event stands for many of the
	// events Fewer counts.
	Absent []string
}

// CheckCondition returns an error when c cannot be checked. Backends call
// it before they write anything.
func CheckCondition(c Condition) error {
	if c.Fewer < 1 {
		return fmt.Errorf("invalid condition: fewer than %d events can never hold", c.Fewer)
	}
	return nil
}
