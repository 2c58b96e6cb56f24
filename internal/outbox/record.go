package outbox

import (
	"errors"
	"fmt"
	"time"
)

// Record is a stored message with its delivery state, as the operators'
// commands of the backends show it.
type Record struct {
	Message
	// DueAt is when the message may next be claimed: its creation, its
	// retry time, or the end of its lease.
	DueAt time.Time
	// LastError is the reason given by the last Retry or Bury, if any.
	LastError string
	// BuriedAt is when the message was buried; zero while it is not.
	BuriedAt time.Time
	// Origin is the request and trace the message was added in.
	Origin Origin
}

// The states of a message as operators see them.
const (
	// StateDue is a message that may be claimed now.
	StateDue = "due"
	// StateWaiting is a message leased by a relay or waiting for its
	// retry time.
	StateWaiting = "waiting"
	// StateBuried is a message the relay stopped delivering.
	StateBuried = "buried"
)

// State returns the state of r at now.
func (r Record) State(now time.Time) string {
	switch {
	case !r.BuriedAt.IsZero():
		return StateBuried
	case r.DueAt.After(now):
		return StateWaiting
	default:
		return StateDue
	}
}

// ListFilter says which messages an operator lists.
type ListFilter struct {
	// State, when not empty, is the only state listed: [StateDue],
	// [StateWaiting] or [StateBuried], judged at Now.
	State string
	// Topic, when not empty, is the only topic listed.
	Topic string
	// Now is the time the states are judged at.
	Now time.Time
	// Limit bounds how many are listed.
	Limit int
}

// ErrNotBuried is returned by the backends' Discard for a message that is
// not buried: a message still to deliver is never thrown away.
var ErrNotBuried = errors.New("outbox: message is not buried")

// CheckFields returns an error unless each of fields is a top-level JSON
// key of ASCII letters, digits and underscores, the keys the backends'
// RedactBuried removes.
func CheckFields(fields []string) error {
	if len(fields) == 0 {
		return errors.New("no fields to redact")
	}
	for _, f := range fields {
		if f == "" {
			return errors.New("an empty field name")
		}
		for _, c := range f {
			if !(c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				return fmt.Errorf("field %q is not a plain key", f)
			}
		}
	}
	return nil
}
