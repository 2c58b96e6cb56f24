package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventsourced/accounts/internal/smtp/mailbox"
)

// InviteConfig sizes the invitation benchmark.
type InviteConfig struct {
	// Concurrency is how many rounds run at once, each client's one
	// after another.
	Concurrency int
	// Duration is how long rounds begin for.
	Duration time.Duration
	// Organizations is how many organizations, each with an owner of its
	// own, are set up before the timed part.
	Organizations int
	// PerOrganization is how many invitations one organization sends:
	// the domain's limit of invitations an organization may send within
	// its window, which is longer than a run.
	PerOrganization int
}

// The steps of an invitation round, in order; the times of a round are
// those of its steps, and then the whole round's.
var inviteSteps = [...]string{"invite", "invitation mail", "sign-in link", "sign-in mail", "session", "accept"}

const (
	roundTime = len(inviteSteps)
	// mailWait is how long a round waits for a mail before it fails.
	mailWait = 10 * time.Second
)

var (
	invitationCode = regexp.MustCompile(`/invitations\?code=([a-z2-7]+)`)
	signInCode     = regexp.MustCompile(`/sign-in\?code=([a-z2-7]+)`)
)

// errNoOrganization is a client that found every organization's
// invitations spent.
var errNoOrganization = errors.New("every organization has sent its invitations")

// Invite serves api, the HTTP API, on loopback and runs relay, which
// delivers the API's mail to sink, and measures invitation rounds: after
// cfg.Organizations owners have each signed in and created an
// organization, cfg.Concurrency clients run rounds for cfg.Duration, each
// one after another. In a round an owner invites a fresh address
// (POST /v1/orgs/{id}/invitations); the relay delivers the invitation
// mail; the address asks for a sign-in link (POST /v1/sign-in-links), the
// relay delivers it, and the address signs in with the code of that mail
// (POST /v1/sessions), which creates its account, and accepts with the
// code of the invitation (POST /v1/invitations). Each client takes an
// organization of its own until it has sent cfg.PerOrganization
// invitations, then the next, so no organization sends more than the
// domain allows, and no two rounds race for one organization's stream.
// Invite prints the times of each step and the summary line, and stops
// api and relay.
func (b Bench) Invite(ctx context.Context, api *http.Server, relay func(context.Context) error, sink *MailSink, cfg InviteConfig) (err error) {
	if cfg.Concurrency < 1 || cfg.Duration <= 0 || cfg.Organizations < 1 || cfg.PerOrganization < 1 {
		return errors.New("bench invite: the concurrency, duration, organizations and invitations per organization must be positive")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("bench invite: %w", err)
	}
	go func() { _ = api.Serve(ln) }()
	defer func() { _ = api.Close() }()
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay(relayCtx) }()
	defer func() {
		stopRelay()
		if rerr := <-relayDone; rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = errors.Join(err, fmt.Errorf("bench invite: relay: %w", rerr))
		}
	}()
	r := inviter{url: "http://" + ln.Addr().String() + "/", sink: sink, cfg: cfg}

	began := time.Now()
	seats, err := r.setUp(ctx)
	if err != nil {
		return fmt.Errorf("bench invite: set up: %w", err)
	}
	fmt.Fprintf(b.Out, "invite: set up %d organizations, each with its owner, in %.2fs\n", len(seats), time.Since(began).Seconds())
	res := r.run(ctx, b, seats)
	if stray := sink.Stray(); stray > 0 {
		fmt.Fprintf(b.Out, "invite: %d mails came that no round waited for\n", stray)
	}
	return res.report(b.Out, cfg.Duration)
}

// inviter runs the rounds of [Bench.Invite] against the API at url.
type inviter struct {
	url  string
	sink *MailSink
	cfg  InviteConfig
}

// seat is an organization and the session of its owner.
type seat struct {
	org, token string
}

// setUp signs in an owner for each organization and has each create one,
// cfg.Concurrency at a time, and returns the organizations.
func (r inviter) setUp(ctx context.Context) ([]seat, error) {
	seats := make([]seat, r.cfg.Organizations)
	var next atomic.Int64
	errs := make([]error, r.cfg.Concurrency)
	var wg sync.WaitGroup
	for w := range r.cfg.Concurrency {
		wg.Go(func() {
			c, err := newKeepAliveClient(r.url, 10*time.Second)
			if err != nil {
				errs[w] = err
				return
			}
			defer c.Close()
			var answer bytes.Buffer
			for i := int(next.Add(1)) - 1; i < len(seats); i = int(next.Add(1)) - 1 {
				token, err := r.signIn(ctx, c, fmt.Sprintf("owner-%d@example.com", i))
				if err != nil {
					errs[w] = err
					return
				}
				var o struct {
					ID string `json:"id"`
				}
				err = r.post(ctx, c, "/v1/orgs", token, fmt.Appendf(nil, `{"name":"Bench %d"}`, i), http.StatusCreated, &answer)
				if err == nil {
					err = json.Unmarshal(answer.Bytes(), &o)
				}
				if err != nil {
					errs[w] = fmt.Errorf("create: %w", err)
					return
				}
				seats[i] = seat{org: o.ID, token: token}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return seats, errors.Join(errs...)
}

// signIn asks for a sign-in link to the address to, takes the code of its
// mail and signs in with it, and returns the session's token.
func (r inviter) signIn(ctx context.Context, c *keepAliveClient, to string) (string, error) {
	mails := r.sink.expect(to, 1)
	defer r.sink.forget(to)
	if err := r.post(ctx, c, "/v1/sign-in-links", "", fmt.Appendf(nil, `{"email":%q}`, to), http.StatusAccepted, nil); err != nil {
		return "", fmt.Errorf("sign-in link: %w", err)
	}
	code, err := codeOf(ctx, mails, signInCode)
	if err != nil {
		return "", fmt.Errorf("sign-in mail: %w", err)
	}
	token, err := r.session(ctx, c, code)
	if err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	return token, nil
}

// session signs in with the code of a sign-in mail and returns the
// session's token.
func (r inviter) session(ctx context.Context, c *keepAliveClient, code string) (string, error) {
	var answer bytes.Buffer
	if err := r.post(ctx, c, "/v1/sessions", "", fmt.Appendf(nil, `{"code":%q}`, code), http.StatusCreated, &answer); err != nil {
		return "", err
	}
	var s struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(answer.Bytes(), &s); err != nil || s.Token == "" {
		return "", fmt.Errorf("no token in the answer (%v)", err)
	}
	return s.Token, nil
}

// post calls path with body and the bearer token, and wants the status
// want.
func (r inviter) post(ctx context.Context, c *keepAliveClient, path, token string, body []byte, want int, answer *bytes.Buffer) error {
	status, err := c.call(ctx, path, token, body, answer)
	if err == nil && status != want {
		err = fmt.Errorf("status %d, want %d", status, want)
	}
	return err
}

// codeOf waits for the next mail on mails and returns the code of its
// link, which link finds.
func codeOf(ctx context.Context, mails <-chan mailbox.Message, link *regexp.Regexp) (string, error) {
	t := time.NewTimer(mailWait)
	defer t.Stop()
	select {
	case m := <-mails:
		code := link.FindStringSubmatch(m.Text)
		if code == nil {
			return "", errors.New("the mail holds no link of the kind awaited")
		}
		return code[1], nil
	case <-t.C:
		return "", fmt.Errorf("no mail within %s", mailWait)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// inviteResult is what the timed part of [Bench.Invite] measured: the
// times of each round's steps and of the whole round.
type inviteResult struct {
	times   [][roundTime + 1]time.Duration
	elapsed time.Duration
	err     error
	cut     error
}

// run has cfg.Concurrency clients run rounds for cfg.Duration with the
// organizations of seats.
func (r inviter) run(ctx context.Context, b Bench, seats []seat) inviteResult {
	free := make(chan seat, len(seats))
	for _, s := range seats {
		free <- s
	}
	var (
		mu    sync.Mutex
		times [][roundTime + 1]time.Duration
		errs  []error
		wg    sync.WaitGroup
		done  atomic.Int64
	)
	stopProfile := b.timed(done.Load)
	defer stopProfile()
	began := time.Now()
	until := began.Add(r.cfg.Duration)
	for w := range r.cfg.Concurrency {
		wg.Go(func() {
			var mine [][roundTime + 1]time.Duration
			defer func() {
				mu.Lock()
				times = append(times, mine...)
				mu.Unlock()
			}()
			fail := func(err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			c, err := newKeepAliveClient(r.url, 10*time.Second)
			if err != nil {
				fail(err)
				return
			}
			defer c.Close()
			var s seat
			sent := r.cfg.PerOrganization
			for i := 0; time.Now().Before(until) && ctx.Err() == nil; i++ {
				if sent == r.cfg.PerOrganization {
					select {
					case s = <-free:
						sent = 0
					default:
						fail(errNoOrganization)
						return
					}
				}
				sent++
				t, err := r.round(ctx, c, s, fmt.Sprintf("invited-%d-%d@example.com", w, i))
				if err != nil && ctx.Err() != nil {
					return // Cut short: this round does not count.
				}
				if err != nil {
					fail(err)
					return
				}
				mine = append(mine, t)
				done.Add(1)
			}
		})
	}
	wg.Wait()
	res := inviteResult{times: times, elapsed: time.Since(began), cut: ctx.Err()}
	switch {
	case slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, errNoOrganization) }):
		res.err = fmt.Errorf("the %d organizations sent their %d invitations each within %.1fs of %s: raise --orgs",
			len(seats), r.cfg.PerOrganization, res.elapsed.Seconds(), r.cfg.Duration)
	case len(errs) > 0:
		res.err = fmt.Errorf("%d rounds failed, the first: %w", len(errs), errs[0])
	}
	return res
}

// round runs one invitation round of the owner of s to the address to,
// and returns the time each step took and the round's.
func (r inviter) round(ctx context.Context, c *keepAliveClient, s seat, to string) (t [roundTime + 1]time.Duration, err error) {
	mails := r.sink.expect(to, 2)
	defer r.sink.forget(to)
	began := time.Now()
	last := began
	step := 0
	// end records the end of the step.
	end := func() {
		now := time.Now()
		t[step], last = now.Sub(last), now
		step++
	}
	fail := func(err error) ([roundTime + 1]time.Duration, error) {
		return t, fmt.Errorf("%s: %w", inviteSteps[step], err)
	}
	if err := r.post(ctx, c, "/v1/orgs/"+s.org+"/invitations", s.token, fmt.Appendf(nil, `{"email":%q,"role":"member"}`, to), http.StatusAccepted, nil); err != nil {
		return fail(err)
	}
	end()
	invitation, err := codeOf(ctx, mails, invitationCode)
	if err != nil {
		return fail(err)
	}
	end()
	if err := r.post(ctx, c, "/v1/sign-in-links", "", fmt.Appendf(nil, `{"email":%q}`, to), http.StatusAccepted, nil); err != nil {
		return fail(err)
	}
	end()
	code, err := codeOf(ctx, mails, signInCode)
	if err != nil {
		return fail(err)
	}
	end()
	token, err := r.session(ctx, c, code)
	if err != nil {
		return fail(err)
	}
	end()
	if err := r.post(ctx, c, "/v1/invitations", token, fmt.Appendf(nil, `{"code":%q}`, invitation), http.StatusOK, nil); err != nil {
		return fail(err)
	}
	end()
	t[roundTime] = last.Sub(began)
	return t, nil
}

// report prints the percentiles of each step and of the whole round, and
// the summary line, for a run meant to last d, or returns why there is
// none.
func (r inviteResult) report(out io.Writer, d time.Duration) error {
	if r.err != nil {
		return fmt.Errorf("bench invite: %w", r.err)
	}
	n := len(r.times)
	if n == 0 {
		if r.cut != nil {
			fmt.Fprintf(out, "invite: 0 rounds in %.2fs (cut short)\n", r.elapsed.Seconds())
			return &CutShortError{Name: "bench invite", Err: r.cut}
		}
		return errors.New("bench invite: no round completed")
	}
	sorted := func(i int) []time.Duration {
		lat := make([]time.Duration, n)
		for j, t := range r.times {
			lat[j] = t[i]
		}
		slices.Sort(lat)
		return lat
	}
	fmt.Fprintf(out, "%-16s %9s %9s %9s %9s\n", "step", "p50", "p90", "p99", "max")
	for i, name := range append(inviteSteps[:], "round") {
		lat := sorted(i)
		fmt.Fprintf(out, "%-16s %9s %9s %9s %9s\n", name,
			percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99), ms(lat[n-1]))
	}
	round := sorted(roundTime)
	line := fmt.Sprintf("invite: %d rounds in %.2fs, %.0f rounds/s, p50=%s p99=%s",
		n, r.elapsed.Seconds(), float64(n)/r.elapsed.Seconds(), percentile(round, 0.50), percentile(round, 0.99))
	if r.cut != nil && r.elapsed < d {
		fmt.Fprintf(out, "%s (cut short: %.1fs of %s)\n", line, r.elapsed.Seconds(), d)
		return &CutShortError{Name: "bench invite", Done: int64(n), Err: r.cut}
	}
	_, err := fmt.Fprintln(out, line)
	return err
}
