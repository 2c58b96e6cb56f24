package user_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/user"
)

// One account may ask for as many email changes as an address may ask for
// sign-in links, so that it can neither flood an inbox nor probe which
// addresses have accounts faster than that.
func TestEmailChangeRequestsAreLimitedPerUser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.signIn(t, "ada@example.com")
	for i := range 5 {
		if err := b.svc.RequestEmailChange(t.Context(), s.Token, fmt.Sprintf("new%d@example.com", i)); err != nil {
			t.Fatalf("change request %d: %v", i+1, err)
		}
		b.clock.Advance(time.Minute)
	}
	b.mails(t)
	events := b.events(t)
	err := b.svc.RequestEmailChange(t.Context(), s.Token, "victim@example.com")
	var tooMany *user.TooManyRequestsError
	if !errors.As(err, &tooMany) || !errors.Is(err, user.ErrTooManyRequests) {
		t.Fatalf("sixth change request: %v, want a *TooManyRequestsError", err)
	}
	if want := 10 * time.Minute; tooMany.RetryAfter != want {
		t.Errorf("RetryAfter %s, want %s: until the first request leaves the window", tooMany.RetryAfter, want)
	}
	b.unchanged(t, "a refused change request", events)
	if ms := b.mails(t); len(ms) != 0 {
		t.Errorf("a refused change request mailed %v", ms)
	}
	// A taken address is refused as too many too, so the limit holds
	// against probing for accounts.
	b.signIn(t, "grace@example.com")
	if err := b.svc.RequestEmailChange(t.Context(), s.Token, "grace@example.com"); !errors.Is(err, user.ErrTooManyRequests) {
		t.Errorf("probing a taken address over the limit: %v, want ErrTooManyRequests", err)
	}
	b.clock.Advance(tooMany.RetryAfter)
	if err := b.svc.RequestEmailChange(t.Context(), s.Token, "victim@example.com"); err != nil {
		t.Errorf("once the window moved on: %v", err)
	}
}
