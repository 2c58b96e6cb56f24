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

// writeError maps an error of the user domain to its problem. invalidCode is
// the status of [user.ErrInvalidCode], which differs by endpoint.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, invalidCode int) {
	var tooMany *user.TooManyRequestsError
	var bad *decodeError
	switch {
	case errors.As(err, &bad):
		writeProblem(w, bad.status, bad.typ, bad.detail)
	case errors.As(err, &tooMany):
		writeTooMany(w, tooMany.RetryAfter, "too many links asked for; retry after the time given")
	case errors.Is(err, user.ErrBadEmail):
		writeProblem(w, http.StatusBadRequest, TypeBadEmail, err.Error())
	case errors.Is(err, user.ErrInvalidCode):
		if invalidCode == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="accounts"`)
		}
		writeProblem(w, invalidCode, TypeInvalidCode, "")
	case errors.Is(err, user.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="accounts"`)
		writeProblem(w, http.StatusUnauthorized, TypeUnauthenticated, "")
	case errors.Is(err, user.ErrEmailTaken):
		writeProblem(w, http.StatusConflict, TypeEmailTaken, "")
	case errors.Is(err, eventstore.ErrConcurrency):
		// The command lost its race with others too often; it changed
		// nothing and may be sent again.
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, TypeBusy, "too many concurrent changes; try again")
	case errors.Is(err, uow.ErrUnavailable):
		// The database cannot be reached or is busy; the command was not
		// done (or rolled back) and may be sent again once it is back.
		log.WarnContext(r.Context(), "database unavailable", "method", r.Method, "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", strconv.Itoa(int(unavailableRetry/time.Second)))
		writeProblem(w, http.StatusServiceUnavailable, TypeUnavailable, "the database cannot be reached or is busy; try again")
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
	default:
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		writeProblem(w, http.StatusInternalServerError, TypeInternal, "")
	}
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
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if err := decode(w, r, &req); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		if err := users.RequestSignInLink(r.Context(), req.Email); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

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
		s, err := users.SignIn(r.Context(), req.Code)
		if err != nil {
			writeError(w, r, log, err, http.StatusUnauthorized)
			return
		}
		writeJSON(w, http.StatusCreated, response{Token: s.Token, ExpiresAt: s.ExpiresAt.UTC(), User: toJSON(s.User, false)})
	}
}

func handleMe(users Users, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, err := users.Me(r.Context(), bearer(r))
		if err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		writeJSON(w, http.StatusOK, toJSON(u, true))
	}
}

func handleRequestEmailChange(users Users, log *slog.Logger) http.HandlerFunc {
	type request struct {
		NewEmail string `json:"new_email"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		token := bearer(r)
		if token == "" {
			writeError(w, r, log, user.ErrUnauthenticated, 0)
			return
		}
		var req request
		if err := decode(w, r, &req); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		if err := users.RequestEmailChange(r.Context(), token, req.NewEmail); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

func handleConfirmEmailChange(users Users, log *slog.Logger) http.HandlerFunc {
	type request struct {
		Code string `json:"code"`
	}
	return func(w http.ResponseWriter, r *http.Request) {
		var req request
		if err := decode(w, r, &req); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		u, err := users.ConfirmEmailChange(r.Context(), req.Code)
		if err != nil {
			writeError(w, r, log, err, http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, toJSON(u, true))
	}
}

func handleSignOut(users Users, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := users.SignOut(r.Context(), bearer(r)); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func handleReady(ready func(context.Context) error, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := ready(ctx); err != nil {
				log.WarnContext(r.Context(), "not ready", "error", err)
				writeProblem(w, http.StatusServiceUnavailable, TypeNotReady, "the database does not answer")
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}
