package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/user"
)

// fakeUsers is a deterministic stand-in for the user domain, for tests of
// the HTTP layer alone (the fuzz target): it answers with the domain's own
// errors, decided from its input only.
//
//   - Addresses are checked by user.NormalizeEmail; a normalised address that
//     starts with "limited" asks too often; the user's own is taken.
//   - Codes are valid when they are exactly 32 lower-case base32 letters; a
//     valid confirmation code that starts with "taken" finds its address
//     taken meanwhile.
//   - The one live session token is fakeToken.
type fakeUsers struct{}

var (
	fakeToken = strings.Repeat("t", 32)
	fakeUser  = user.User{ID: uuid.MustParse("01900000-0000-7000-8000-000000000001"), Email: "ada@example.com", CreatedAt: start}
)

var _ httpapi.Users = fakeUsers{}

// fakeValidCode reports whether s is 32 lower-case base32 letters.
func fakeValidCode(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

func (fakeUsers) RequestSignInLink(_ context.Context, address string) error {
	email, err := user.NormalizeEmail(address)
	if err != nil {
		return err
	}
	if strings.HasPrefix(email, "limited") {
		return &user.TooManyRequestsError{RetryAfter: 90*time.Second + time.Millisecond}
	}
	return nil
}

func (fakeUsers) SignIn(_ context.Context, code string) (user.Session, error) {
	if !fakeValidCode(code) {
		return user.Session{}, fmt.Errorf("%w: malformed", user.ErrInvalidCode)
	}
	return user.Session{Token: fakeToken, ExpiresAt: start.Add(sessionTTL), User: fakeUser}, nil
}

func (fakeUsers) Me(_ context.Context, token string) (user.User, error) {
	if token != fakeToken {
		return user.User{}, user.ErrUnauthenticated
	}
	return fakeUser, nil
}

func (f fakeUsers) DeleteAccount(ctx context.Context, token string) error {
	return f.SignOut(ctx, token)
}

func (fakeUsers) SignOut(_ context.Context, token string) error {
	if token != fakeToken {
		return user.ErrUnauthenticated
	}
	return nil
}

func (fakeUsers) RequestEmailChange(_ context.Context, token, address string) error {
	email, err := user.NormalizeEmail(address)
	if err != nil {
		return err
	}
	if token != fakeToken {
		return user.ErrUnauthenticated
	}
	if email == fakeUser.Email {
		return fmt.Errorf("%w: %s", user.ErrEmailTaken, email)
	}
	return nil
}

func (fakeUsers) SignInAddress(_ context.Context, code string) (string, error) {
	if !fakeValidCode(code) {
		return "", fmt.Errorf("%w: malformed", user.ErrInvalidCode)
	}
	return fakeUser.Email, nil
}

func (fakeUsers) EmailChangeOf(_ context.Context, code string) (string, string, error) {
	if !fakeValidCode(code) {
		return "", "", fmt.Errorf("%w: malformed", user.ErrInvalidCode)
	}
	return fakeUser.Email, "new@example.com", nil
}

func (fakeUsers) ConfirmEmailChange(_ context.Context, code string) (user.User, error) {
	if !fakeValidCode(code) {
		return user.User{}, fmt.Errorf("%w: malformed", user.ErrInvalidCode)
	}
	if strings.HasPrefix(code, "taken") {
		return user.User{}, fmt.Errorf("%w: meanwhile", user.ErrEmailTaken)
	}
	u := fakeUser
	u.Email = "new@example.com"
	return u, nil
}

// serve sends one request to h in process and returns the answer.
func serve(t *testing.T, h http.Handler, method, path, remote string, header map[string]string, body []byte) response {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, bytes.NewReader(body))
	if remote != "" {
		req.RemoteAddr = remote
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	out := response{status: res.StatusCode, header: res.Header, body: b}
	checkContract(t, method, path, body, out)
	return out
}

// TestClientRateLimitPerClient: each client address has its own budget.
func TestClientRateLimitPerClient(t *testing.T) {
	t.Parallel()
	now := start
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, RateLimit: 2, Now: func() time.Time { return now }})
	me := func(remote string) response {
		return serve(t, h, "GET", "/v1/me", remote, map[string]string{"Authorization": "Bearer " + fakeToken}, nil)
	}
	for range 2 {
		wantStatus(t, "client A within its limit", me("192.0.2.1:1000"), http.StatusOK)
	}
	// Another port of the same address is the same client.
	r := me("192.0.2.1:2000")
	wantProblem(t, "client A from another port", r, http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	if wait := wantRetryAfter(t, "client A", r); wait != 30*time.Second {
		t.Errorf("Retry-After %s, want 30s", wait)
	}
	// Other clients, IPv4 and IPv6, are not held back by A.
	for _, remote := range []string{"192.0.2.2:1000", "[2001:db8::1]:1000", "[2001:db8:0:1::1]:1000", "[::ffff:192.0.2.3]:1000"} {
		for range 2 {
			wantStatus(t, "client "+remote, me(remote), http.StatusOK)
		}
		wantProblem(t, "client "+remote+" over its limit", me(remote), http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	}
	// An IPv6 client commonly holds a whole /64: its addresses share a budget.
	wantProblem(t, "another address of the first IPv6 /64", me("[2001:DB8::2]:1000"), http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	// An IPv4-mapped IPv6 address is that IPv4 client.
	wantProblem(t, "client A as IPv4-mapped IPv6", me("[::ffff:192.0.2.1]:1000"), http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
	// /healthz is not limited even for a client over its limit.
	wantStatus(t, "/healthz", serve(t, h, "GET", "/healthz", "192.0.2.1:1000", nil, nil), http.StatusOK)
}

// panicky is a domain that panics or fails in ways the API does not know.
type panicky struct{ fakeUsers }

func (panicky) Me(context.Context, string) (user.User, error)           { panic("boom") }
func (p panicky) DeleteAccount(ctx context.Context, token string) error { return p.SignOut(ctx, token) }

func (panicky) SignOut(context.Context, string) error {
	return errors.New("connection refused to 10.0.0.7:5432 password=hunter2")
}

// TestUnexpectedErrors: a panic or an unknown error is a 500 problem that
// shows nothing of its cause.
func TestUnexpectedErrors(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: panicky{}})
	auth := map[string]string{"Authorization": "Bearer " + fakeToken}
	for _, c := range []struct{ method, path string }{{"GET", "/v1/me"}, {"DELETE", "/v1/sessions/current"}} {
		r := serve(t, h, c.method, c.path, "", auth, nil)
		p := wantProblem(t, c.method+" "+c.path, r, http.StatusInternalServerError, httpapi.TypeInternal)
		if strings.Contains(string(r.body), "boom") || strings.Contains(string(r.body), "hunter2") || p.Detail != "" {
			t.Errorf("%s %s: the 500 shows its cause: %s", c.method, c.path, r.body)
		}
	}
}

// TestFakeSuccessBodies checks the shapes of the success answers with the
// fake domain, where every field is known.
func TestFakeSuccessBodies(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}})
	r := serve(t, h, "POST", "/v1/sessions", "", nil, []byte(codeBody(strings.Repeat("a", 32))))
	wantStatus(t, "sign-in", r, http.StatusCreated)
	var s session
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("201 body %s: %v", r.body, err)
	}
	if s.Token != fakeToken || !s.ExpiresAt.Equal(start.Add(sessionTTL)) || s.User.ID != fakeUser.ID || s.User.Email != fakeUser.Email {
		t.Errorf("201 body %s", r.body)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("a session token is sent with Cache-Control %q, want no-store", cc)
	}
}

// TestClientRateLimitBehindTrustedProxies: from a trusted proxy the client
// is the rightmost hop of X-Forwarded-For that is no trusted proxy; from
// anyone else the header changes nothing.
func TestClientRateLimitBehindTrustedProxies(t *testing.T) {
	t.Parallel()
	now := start
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, RateLimit: 1, Now: func() time.Time { return now },
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}})
	me := func(remote, xff string) int {
		headers := map[string]string{"Authorization": "Bearer " + fakeToken}
		if xff != "" {
			headers["X-Forwarded-For"] = xff
		}
		return serve(t, h, "GET", "/v1/me", remote, headers, nil).status
	}
	// Two clients behind one proxy each have their budget.
	if me("10.0.0.5:1000", "198.51.100.1") != http.StatusOK || me("10.0.0.5:1000", "198.51.100.2") != http.StatusOK {
		t.Fatal("two clients behind the proxy share a budget")
	}
	if got := me("10.0.0.6:1000", "198.51.100.1"); got != http.StatusTooManyRequests {
		t.Errorf("the first client again, through another proxy: %d, want 429", got)
	}
	// A client cannot escape by putting made-up hops to the left: the
	// rightmost untrusted hop counts, through a chain of trusted proxies.
	if got := me("10.0.0.5:1000", "203.0.113.9, 198.51.100.2, 10.0.0.7"); got != http.StatusTooManyRequests {
		t.Errorf("a made-up hop left of the second client: %d, want 429", got)
	}
	// From a peer that is not a trusted proxy, the header is ignored.
	if me("192.0.2.50:1000", "198.51.100.3") != http.StatusOK {
		t.Fatal("first request of an untrusted peer refused")
	}
	if got := me("192.0.2.50:1000", "198.51.100.4"); got != http.StatusTooManyRequests {
		t.Errorf("an untrusted peer changed its client by the header: %d, want 429", got)
	}
	// A hop that is no address ends the walk: the hop right of it counts.
	if got := me("10.0.0.5:1000", "garbage, 198.51.100.5"); got != http.StatusOK {
		t.Errorf("a new client behind a garbage hop: %d, want 200", got)
	}
	// IPv6 proxies too, and the client's /64.
	if me("[2001:db8:ffff::1]:1000", "2001:db8:1::1") != http.StatusOK {
		t.Fatal("first request of an IPv6 client behind an IPv6 proxy refused")
	}
	if got := me("[2001:db8:ffff::2]:1000", "2001:db8:1::2"); got != http.StatusTooManyRequests {
		t.Errorf("another address of the client's /64: %d, want 429", got)
	}
}
