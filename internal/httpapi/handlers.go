package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// unavailableRetry is the Retry-After of [TypeUnavailable]: about as long
// as a database takes to restart or a lock holder to let go.
const unavailableRetry = 5 * time.Second

// failure is how the service answers an error: the status, the problem
// type and detail, and the headers the status needs.
type failure struct {
	status int
	typ    string
	detail string
	// retryAfter, when not 0, is sent as Retry-After.
	retryAfter time.Duration
	// challenge sends WWW-Authenticate with a 401.
	challenge bool
}

// failureOf maps an error of the user or the organizations domain
// ([orgFailureOf]) to its answer, and logs what an operator must see.
// invalidCode is the status of [user.ErrInvalidCode], which differs by
// endpoint. It returns false when nobody reads the answer.
func failureOf(r *http.Request, log *slog.Logger, err error, invalidCode int) (failure, bool) {
	if f, ok := orgFailureOf(err); ok {
		return f, true
	}
	var tooMany *user.TooManyRequestsError
	var bad *decodeError
	switch {
	case errors.As(err, &bad):
		return failure{status: bad.status, typ: bad.typ, detail: bad.detail}, true
	case errors.As(err, &tooMany):
		return failure{status: http.StatusTooManyRequests, typ: TypeTooManyRequests,
			detail: "too many links asked for; retry after the time given", retryAfter: tooMany.RetryAfter}, true
	case errors.Is(err, user.ErrBadEmail):
		return failure{status: http.StatusBadRequest, typ: TypeBadEmail, detail: err.Error()}, true
	case errors.Is(err, user.ErrInvalidCode):
		return failure{status: invalidCode, typ: TypeInvalidCode, challenge: invalidCode == http.StatusUnauthorized}, true
	case errors.Is(err, user.ErrUnauthenticated):
		return failure{status: http.StatusUnauthorized, typ: TypeUnauthenticated, challenge: true}, true
	case errors.Is(err, user.ErrNoSuchSession):
		return failure{status: http.StatusNotFound, typ: TypeNotFound, detail: "no live session of this account has that ID"}, true
	case errors.Is(err, user.ErrEmailTaken):
		return failure{status: http.StatusConflict, typ: TypeEmailTaken}, true
	case errors.Is(err, eventstore.ErrConcurrency):
		// The command lost its race with others too often; it changed
		// nothing and may be sent again.
		return failure{status: http.StatusServiceUnavailable, typ: TypeBusy,
			detail: "too many concurrent changes; try again", retryAfter: time.Second}, true
	case errors.Is(err, uow.ErrUnavailable):
		// The database cannot be reached or is busy; the command was not
		// done (or rolled back) and may be sent again once it is back.
		log.WarnContext(r.Context(), "database unavailable", "method", clip(r.Method), "path", clip(r.URL.Path), "error", err)
		return failure{status: http.StatusServiceUnavailable, typ: TypeUnavailable,
			detail: "the database cannot be reached or is busy; try again", retryAfter: unavailableRetry}, true
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
		return failure{}, false
	default:
		log.ErrorContext(r.Context(), "request failed", "method", clip(r.Method), "path", clip(r.URL.Path), "error", err)
		return failure{status: http.StatusInternalServerError, typ: TypeInternal}, true
	}
}

// setHeaders sets the headers f's status needs.
func (f failure) setHeaders(w http.ResponseWriter) {
	if f.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(f.retryAfter)))
	}
	if f.challenge {
		w.Header().Set("WWW-Authenticate", `Bearer realm="accounts"`)
	}
}

// writeError answers err as a problem (see [failureOf]).
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, invalidCode int) {
	f, ok := failureOf(r, log, err, invalidCode)
	if !ok {
		return
	}
	f.setHeaders(w)
	writeProblem(w, r, f.status, f.typ, f.detail)
}

// bearer returns the token of an Authorization: Bearer header, or "".
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

func handleRequestSignInLink(users Users, log *slog.Logger) http.HandlerFunc {
	type request struct {
		Email string `json:"email"`
	}
	return route(log, withoutSession, http.StatusAccepted, func(_ http.ResponseWriter, r *http.Request, _ string, req request) (any, error) {
		return nil, users.RequestSignInLink(r.Context(), req.Email)
	})
}

// handleSignIn uses a sign-in code: 201 with a new session and its user.
// It is no [route], as it alone answers a code that does not work with a
// 401 and its challenge.
func handleSignIn(users Users, log *slog.Logger) http.HandlerFunc {
	type request struct {
		Code string `json:"code"`
	}
	type response struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
		User      userJSON  `json:"user"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if err := decode(w, r, &req); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		s, err := users.SignIn(withClient(r), req.Code)
		if err != nil {
			writeError(w, r, log, err, http.StatusUnauthorized)
			return
		}
		writeJSON(w, http.StatusCreated, response{Token: s.Token, ExpiresAt: s.ExpiresAt.UTC(), User: toJSON(s.User, false)})
	}
}

func handleMe(users Users, log *slog.Logger) http.HandlerFunc {
	return route(log, withSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		u, err := users.Me(r.Context(), token)
		if err != nil {
			return nil, err
		}
		return toJSON(u, true), nil
	})
}

func handleRequestEmailChange(users Users, log *slog.Logger) http.HandlerFunc {
	type request struct {
		NewEmail string `json:"new_email"`
	}
	return route(log, withSession, http.StatusAccepted, func(_ http.ResponseWriter, r *http.Request, token string, req request) (any, error) {
		return nil, users.RequestEmailChange(r.Context(), token, req.NewEmail)
	})
}

// handleConfirmEmailChange uses the code mailed to the new address: 200
// with the user at that address. The session that confirms, if any, is
// the one that stays.
func handleConfirmEmailChange(users Users, log *slog.Logger) http.HandlerFunc {
	return route(log, withoutSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, token string, req codeRequest) (any, error) {
		u, err := users.ConfirmEmailChange(r.Context(), req.Code, token)
		if err != nil {
			return nil, err
		}
		return toJSON(u, true), nil
	})
}

func handleSignOut(users Users, log *slog.Logger) http.HandlerFunc {
	return route(log, withSession, http.StatusNoContent, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		return nil, users.SignOut(r.Context(), token)
	})
}

// handleDeleteAccount erases the account of the bearer's session
// ([user.Service.DeleteAccount]): 204, and the token, and every other of
// the account, stops working.
func handleDeleteAccount(users Users, log *slog.Logger) http.HandlerFunc {
	return route(log, withSession, http.StatusNoContent, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		return nil, users.DeleteAccount(r.Context(), token)
	})
}

// ErrStopping is what a [Deps.Ready] returns once the service has begun to
// stop: /readyz then answers 503 and says so, so that a load balancer
// sends nothing more while the requests in flight finish.
var ErrStopping = errors.New("httpapi: the service is stopping")

// Health returns the liveness probe, /healthz: 200 whenever the process
// serves HTTP, asking nothing else.
func Health() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// Ready returns the readiness probe, /readyz: 200 while ready, which may
// be nil, returns nil within 2 s; otherwise 503 /problems/not-ready, which
// says when the service is stopping ([ErrStopping]). log, which may be
// nil, hears why it is not ready.
func Ready(ready func(context.Context) error, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			err := ready(ctx)
			if errors.Is(err, ErrStopping) {
				writeProblem(w, r, http.StatusServiceUnavailable, TypeNotReady, "the service is stopping")
				return
			}
			if err != nil {
				log.WarnContext(r.Context(), "not ready", "error", err)
				// The log says which: the database, or the relay's claims.
				writeProblem(w, r, http.StatusServiceUnavailable, TypeNotReady, "the database does not answer or the relay cannot claim messages")
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}
