package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
//   - The one live session token is fakeToken; its account has one other
//     session, fakeOtherSession.
//   - A valid undo code that starts with "taken" finds the old address
//     taken meanwhile.
type fakeUsers struct{}

var (
	fakeToken = strings.Repeat("t", 32)
	fakeUser  = user.User{ID: uuid.MustParse("01900000-0000-7000-8000-000000000001"), Email: "ada@example.com", CreatedAt: start}
)

var _ httpapi.Users = fakeUsers{}

var fakeOtherSession = uuid.MustParse("01900000-0000-7000-8000-000000000002")

func (fakeUsers) Sessions(_ context.Context, token string) ([]user.SessionInfo, error) {
	if token != fakeToken {
		return nil, user.ErrUnauthenticated
	}
	return []user.SessionInfo{
		{ID: uuid.MustParse("01900000-0000-7000-8000-000000000003"), StartedAt: start, LastUsedAt: start,
			ExpiresAt: start.Add(sessionTTL), Client: "Firefox on Linux", Current: true},
		{ID: fakeOtherSession, StartedAt: start, LastUsedAt: start, ExpiresAt: start.Add(sessionTTL)},
	}, nil
}

func (fakeUsers) EndSession(_ context.Context, token string, id uuid.UUID) error {
	if token != fakeToken {
		return user.ErrUnauthenticated
	}
	if id != fakeOtherSession {
		return user.ErrNoSuchSession
	}
	return nil
}

func (fakeUsers) EndOtherSessions(_ context.Context, token string) (int, error) {
	if token != fakeToken {
		return 0, user.ErrUnauthenticated
	}
	return 1, nil
}

func (fakeUsers) UndoEmailAddress(_ context.Context, code string) (string, error) {
	if !fakeValidCode(code) {
		return "", fmt.Errorf("%w: malformed", user.ErrInvalidCode)
	}
	return fakeUser.Email, nil
}

func (fakeUsers) UndoEmailChange(_ context.Context, code string) (user.User, error) {
	if !fakeValidCode(code) {
		return user.User{}, fmt.Errorf("%w: malformed", user.ErrInvalidCode)
	}
	if strings.HasPrefix(code, "taken") {
		return user.User{}, fmt.Errorf("%w: meanwhile", user.ErrEmailTaken)
	}
	return fakeUser, nil
}

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

func (fakeUsers) ConfirmEmailChange(_ context.Context, code, _ string) (user.User, error) {
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
