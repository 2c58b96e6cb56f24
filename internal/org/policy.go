package org

import (
	"errors"
	"fmt"
	"time"
)

// Policy holds the limits of the domain. Zero fields take the defaults of
// [Policy.WithDefaults], the only place they are written.
type Policy struct {
	// InvitationLimit is how many invitations one organization may send
	// within InvitationWindow, so that its owners cannot flood inboxes
	// through it.
	InvitationLimit int
	// InvitationAccountLimit is how many invitations one account may
	// send within InvitationWindow, in all its organizations together,
	// those it has deleted included, so that an account cannot flood
	// inboxes through organizations it makes one after another.
	InvitationAccountLimit int
	// InvitationWindow is the window both limits count in.
	InvitationWindow time.Duration
	// InvitationTTL is how long an invitation's code works.
	InvitationTTL time.Duration
}

// WithDefaults returns p with each zero field set to its default: 20
// invitations an hour from an organization and 50 from an account, each
// working for 7 days.
func (p Policy) WithDefaults() Policy {
	if p.InvitationLimit == 0 {
		p.InvitationLimit = 20
	}
	if p.InvitationAccountLimit == 0 {
		p.InvitationAccountLimit = 50
	}
	if p.InvitationWindow == 0 {
		p.InvitationWindow = time.Hour
	}
	if p.InvitationTTL == 0 {
		p.InvitationTTL = 7 * 24 * time.Hour
	}
	return p
}

// The floors of a [Policy]: below them a setting starts but cannot work
// as meant.
const (
	// MinInvitationWindow keeps INVITATION_LIMIT a limit: a window of a
	// few nanoseconds counts nothing.
	MinInvitationWindow = time.Minute
	// MinInvitationTTL leaves time for the mail to arrive and the
	// invited address to sign in before the code expires.
	MinInvitationTTL = time.Hour
)

// Validate reports values that cannot work, by the names of the
// variables that set them.
func (p Policy) Validate() error {
	var errs []error
	if p.InvitationLimit < 1 {
		errs = append(errs, fmt.Errorf("INVITATION_LIMIT must be at least 1, got %d", p.InvitationLimit))
	}
	if p.InvitationAccountLimit < 1 {
		errs = append(errs, fmt.Errorf("INVITATION_ACCOUNT_LIMIT must be at least 1, got %d", p.InvitationAccountLimit))
	}
	if p.InvitationWindow < MinInvitationWindow {
		errs = append(errs, fmt.Errorf("INVITATION_WINDOW must be at least %s, got %s", MinInvitationWindow, p.InvitationWindow))
	}
	if p.InvitationTTL < MinInvitationTTL {
		errs = append(errs, fmt.Errorf("INVITATION_TTL must be at least %s, got %s", MinInvitationTTL, p.InvitationTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("org: invalid policy: %w", err)
	}
	return nil
}
