package user

import (
	"errors"
	"fmt"
	"time"

	"github.com/eventsourced/accounts/internal/aggregate"
)

// Policy holds the limits of the domain. Zero fields take the defaults of
// [Policy.WithDefaults], the only place they are written.
type Policy struct {
	// LinkTTL is how long a sign-in or confirmation link works.
	LinkTTL time.Duration
	// SessionTTL is how long a session lasts.
	SessionTTL time.Duration
	// LinkLimit is how many sign-in links one mailbox (an address and its
	// +tag spellings together), or email changes one user, may ask for
	// within LinkWindow.
	LinkLimit int
	// LinkWindow is the window LinkLimit counts in.
	LinkWindow time.Duration
	// MailBudget and MailBudgetWindow size the budget of mail.Budget,
	// which the relay spends: a person's own use is a few sign-in links
	// and a change of address an hour, well within 20, while it caps
	// what strangers can set off at one mailbox, through any spelling of
	// it and any topic, at 20 an hour instead of no limit.
	MailBudget       int
	MailBudgetWindow time.Duration
}

// WithDefaults returns p with each zero field set to its default.
func (p Policy) WithDefaults() Policy {
	if p.LinkTTL == 0 {
		p.LinkTTL = 15 * time.Minute
	}
	if p.SessionTTL == 0 {
		p.SessionTTL = 30 * 24 * time.Hour
	}
	if p.LinkLimit == 0 {
		p.LinkLimit = 5
	}
	if p.LinkWindow == 0 {
		p.LinkWindow = 15 * time.Minute
	}
	if p.MailBudget == 0 {
		p.MailBudget = 20
	}
	if p.MailBudgetWindow == 0 {
		p.MailBudgetWindow = time.Hour
	}
	return p
}

// Validate reports values that cannot work, by their variable names.
func (p Policy) Validate() error {
	var errs []error
	if p.LinkTTL <= 0 {
		errs = append(errs, fmt.Errorf("LINK_TTL must be positive, got %s", p.LinkTTL))
	}
	if p.SessionTTL <= 0 {
		errs = append(errs, fmt.Errorf("SESSION_TTL must be positive, got %s", p.SessionTTL))
	}
	if p.LinkLimit < 1 {
		errs = append(errs, fmt.Errorf("LINK_LIMIT must be at least 1, got %d", p.LinkLimit))
	}
	if p.LinkWindow <= 0 {
		errs = append(errs, fmt.Errorf("LINK_WINDOW must be positive, got %s", p.LinkWindow))
	}
	if p.MailBudget < 1 {
		errs = append(errs, fmt.Errorf("MAIL_BUDGET must be at least 1, got %d", p.MailBudget))
	}
	if p.MailBudgetWindow <= 0 {
		errs = append(errs, fmt.Errorf("MAIL_BUDGET_WINDOW must be positive, got %s", p.MailBudgetWindow))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("user: invalid policy: %w", err)
	}
	return nil
}

// linkWindow is the limit of LinkLimit requests within LinkWindow that
// sign-in links and changes of address keep, each from its stream.
func (p Policy) linkWindow() aggregate.Window {
	return aggregate.Window{Limit: p.LinkLimit, Per: p.LinkWindow}
}
