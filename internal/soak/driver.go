package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// driver runs users through their flows: sign up, maybe sign in again,
// maybe change address, maybe delete the account.
type driver struct {
	s *soak
	// starts gives a token for each flow to start; nil: no limit.
	starts  chan struct{}
	flows   atomic.Int64
	stalled atomic.Int64
}

var addresses atomic.Int64

// newAddress returns an address nobody used in this run.
func newAddress(tag string) string {
	return fmt.Sprintf("%s%d@soak.test", tag, addresses.Add(1))
}

func (d *driver) work(ctx context.Context) {
	for ctx.Err() == nil {
		if d.starts != nil {
			select {
			case <-d.starts:
			case <-ctx.Done():
				return
			}
		}
		if n := d.s.cfg.Users; n > 0 && d.flows.Add(1) > int64(n) {
			return
		} else if n <= 0 {
			d.flows.Add(1)
		}
		if err := d.flow(ctx); err != nil && ctx.Err() == nil {
			d.stalled.Add(1)
			d.s.logf("a flow stopped: %v", err)
		}
	}
}

// flow takes one new user through a random path. An error ends it; what
// the ledger holds so far stays.
func (d *driver) flow(ctx context.Context) error {
	u := &user{d: d, email: newAddress("u"), taken: map[string]bool{}}
	if err := u.signIn(ctx, true); err != nil {
		return err
	}
	if rand.IntN(2) == 0 {
		if err := u.signIn(ctx, false); err != nil {
			return err
		}
	}
	if rand.IntN(5) < 2 {
		if err := u.changeAddress(ctx); err != nil {
			return err
		}
	}
	if rand.IntN(2) == 0 {
		return u.delete(ctx)
	}
	return nil
}

type user struct {
	d     *driver
	email string
	id    string
	token string
	taken map[string]bool
}

var errAbandoned = errors.New("outcome unknown, flow abandoned")

// askLink asks for a sign-in link for the address and records the mail.
func askLink(ctx context.Context, c *client, l *ledger, email string) error {
	a, uncertain, err := c.do(ctx, http.MethodPost, "/v1/sign-in-links", "", map[string]string{"email": email})
	for range uncertain {
		l.mail(email, kindSignIn, true)
	}
	if err != nil {
		return fmt.Errorf("ask for a link: %w", err)
	}
	if a.status != http.StatusAccepted {
		l.strange(fmt.Sprintf("POST /v1/sign-in-links %d", a.status))
		return fmt.Errorf("ask for a link: %d %.200s", a.status, a.body)
	}
	l.mail(email, kindSignIn, false)
	return nil
}

func (u *user) mailWait(ctx context.Context, to, kind string) (mail, error) {
	ctx, cancel := context.WithTimeout(ctx, u.d.s.cfg.MailWait)
	defer cancel()
	return u.d.s.mail.next(ctx, to, kind, u.taken)
}

func (u *user) signIn(ctx context.Context, first bool) error {
	s := u.d.s
	if err := askLink(ctx, s.client, s.ledger, u.email); err != nil {
		return err
	}
	m, err := u.mailWait(ctx, u.email, kindSignIn)
	if err != nil {
		return err
	}
	a, uncertain, err := s.client.do(ctx, http.MethodPost, "/v1/sessions", "", map[string]string{"code": m.code})
	if err != nil || (uncertain > 0 && a.status == http.StatusUnauthorized) {
		// The code may have been used by an attempt whose answer was lost.
		if first {
			s.ledger.unknownUser()
		} else if uncertain > 0 {
			s.ledger.event(u.id, evSignedIn, true)
		}
		if err != nil {
			return fmt.Errorf("sign in: %w", err)
		}
		return fmt.Errorf("sign in: %w", errAbandoned)
	}
	if a.status != http.StatusCreated {
		s.ledger.strange(fmt.Sprintf("POST /v1/sessions %d", a.status))
		return fmt.Errorf("sign in: %d %.200s", a.status, a.body)
	}
	var session struct {
		Token string `json:"token"`
		User  struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if err := json.Unmarshal(a.body, &session); err != nil {
		return fmt.Errorf("sign in: answer %.200s: %w", a.body, err)
	}
	if session.Token == "" {
		return fmt.Errorf("sign in: answer %.200s has no token", a.body)
	}
	if first {
		u.id = session.User.ID
		s.ledger.event(u.id, evRegistered, false)
	} else if session.User.ID != u.id {
		s.ledger.strange("a sign-in reached another account")
		return fmt.Errorf("sign in: user %s, want %s", session.User.ID, u.id)
	}
	s.ledger.event(u.id, evSignedIn, false)
	u.token = session.Token
	return nil
}

func (u *user) changeAddress(ctx context.Context) error {
	s := u.d.s
	to := newAddress("c")
	a, uncertain, err := s.client.do(ctx, http.MethodPost, "/v1/me/email-change", u.token, map[string]string{"new_email": to})
	for range uncertain {
		s.ledger.mail(to, kindConfirm, true)
	}
	if err != nil {
		return fmt.Errorf("ask to change address: %w", err)
	}
	if a.status != http.StatusAccepted {
		s.ledger.strange(fmt.Sprintf("POST /v1/me/email-change %d", a.status))
		return fmt.Errorf("ask to change address: %d %.200s", a.status, a.body)
	}
	s.ledger.mail(to, kindConfirm, false)
	m, err := u.mailWait(ctx, to, kindConfirm)
	if err != nil {
		return err
	}
	// Confirmed from the user's session, which stays; the address it
	// leaves is told.
	a, uncertain, err = s.client.do(ctx, http.MethodPost, "/v1/email-changes", u.token, map[string]string{"code": m.code})
	if err != nil || (uncertain > 0 && a.status == http.StatusBadRequest) {
		s.ledger.event(u.id, evEmailChanged, true)
		s.ledger.mail(u.email, kindNotice, true)
		if err != nil {
			return fmt.Errorf("confirm the change: %w", err)
		}
		return fmt.Errorf("confirm the change: %w", errAbandoned)
	}
	if a.status != http.StatusOK {
		s.ledger.strange(fmt.Sprintf("POST /v1/email-changes %d", a.status))
		return fmt.Errorf("confirm the change: %d %.200s", a.status, a.body)
	}
	s.ledger.event(u.id, evEmailChanged, false)
	s.ledger.mail(u.email, kindNotice, false)
	// The notice arrives before the flow goes on: an erasure would take
	// it from the outbox with the rest of the account's mail.
	if _, err := u.mailWait(ctx, u.email, kindNotice); err != nil {
		return err
	}
	u.email = to
	return nil
}

// delete erases the account once the broker holds the user's events: an
// erasure drops the events not yet published, which the ledger would miss.
func (u *user) delete(ctx context.Context) error {
	s := u.d.s
	wait, cancel := context.WithTimeout(ctx, s.cfg.MailWait)
	defer cancel()
	if err := s.broker.waitFor(wait, u.id, s.ledger.required(u.id)); err != nil {
		return fmt.Errorf("before deleting: %w", err)
	}
	a, uncertain, err := s.client.do(ctx, http.MethodDelete, "/v1/me", u.token, nil)
	if err != nil {
		s.ledger.event(u.id, evDeleted, true)
		return fmt.Errorf("delete: %w", err)
	}
	if a.status == http.StatusNoContent || (uncertain > 0 && a.status == http.StatusUnauthorized) {
		s.ledger.event(u.id, evDeleted, false)
		return nil
	}
	s.ledger.strange(fmt.Sprintf("DELETE /v1/me %d", a.status))
	return fmt.Errorf("delete: %d %.200s", a.status, a.body)
}

// burst asks for n sign-in links at once, each to a new address, and
// returns the mails per second from the first request to the last mail.
func (s *soak) burst(ctx context.Context, name string) (float64, error) {
	n := s.cfg.DrainBurst
	emails := make([]string, n)
	for i := range emails {
		emails[i] = newAddress("b-" + name + "-")
	}
	began := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	jobs := make(chan string)
	for range 16 {
		wg.Go(func() {
			for e := range jobs {
				if err := askLink(ctx, s.client, s.ledger, e); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	for _, e := range emails {
		jobs <- e
	}
	close(jobs)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return 0, fmt.Errorf("soak: drain burst %s: %d of %d link requests failed", name, f, n)
	}
	wait, cancel := context.WithTimeout(ctx, s.cfg.MailWait)
	defer cancel()
	var last time.Time
	for _, e := range emails {
		m, err := s.mail.next(wait, e, kindSignIn, map[string]bool{})
		if err != nil {
			return 0, fmt.Errorf("soak: drain burst %s: %w", name, err)
		}
		if m.at.After(last) {
			last = m.at
		}
	}
	rate := float64(n) / last.Sub(began).Seconds()
	s.samples.mark(name, began, last)
	return rate, nil
}

// bestBurst is the best of three bursts, after one that warms up (the
// first after a quiet spell is the slowest, at the start as at the end):
// the machine's other work slows some, never speeds one up.
func (s *soak) bestBurst(ctx context.Context, name string) (float64, error) {
	if _, err := s.burst(ctx, name+"-warm"); err != nil {
		return 0, err
	}
	var rates []float64
	for i := range 3 {
		r, err := s.burst(ctx, fmt.Sprintf("%s%d", name, i+1))
		if err != nil {
			return 0, err
		}
		rates = append(rates, r)
	}
	sort.Float64s(rates)
	s.logf("drain bursts (%s): %.0f, %.0f and %.0f mails/s", name, rates[0], rates[1], rates[2])
	return rates[2], nil
}
