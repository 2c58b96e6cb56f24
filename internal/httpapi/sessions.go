package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/mileusna/useragent"

	"github.com/eventsourced/accounts/internal/user"
)

// withClient returns r's context carrying a coarse description of its
// client, such as "Firefox on Linux", from its User-Agent
// ([user.WithClient]): enough for a person to tell their sessions apart,
// and no more of the header than that.
func withClient(r *http.Request) context.Context {
	return user.WithClient(r.Context(), describeClient(r.UserAgent()))
}

// describeClient names the browser or program of a User-Agent, and the
// system it runs on when the header says; "" when it says neither. A name
// that is not a plain word or two (the header is the client's to write)
// is left out.
func describeClient(header string) string {
	if header == "" {
		return ""
	}
	ua := useragent.Parse(header)
	name, os := plainName(ua.Name), plainName(ua.OS)
	switch {
	case name == "" && os == "":
		return ""
	case os == "":
		return name
	case name == "":
		return "A client on " + os
	}
	return name + " on " + os
}

// sessionJSON is a session as the API lists it.
type sessionJSON struct {
	ID         uuid.UUID `json:"id"`
	StartedAt  time.Time `json:"started_at"`
	LastUsedAt time.Time `json:"last_used_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Client     string    `json:"client"`
	Current    bool      `json:"current"`
}

func sessionsJSON(list []user.SessionInfo) []sessionJSON {
	out := make([]sessionJSON, 0, len(list))
	for _, s := range list {
		out = append(out, sessionJSON{
			ID: s.ID, StartedAt: s.StartedAt.UTC(), LastUsedAt: s.LastUsedAt.UTC(), ExpiresAt: s.ExpiresAt.UTC(),
			Client: s.Client, Current: s.Current,
		})
	}
	return out
}

// handleSessions lists the live sessions of the bearer's account.
func handleSessions(users Users, log *slog.Logger) http.HandlerFunc {
	type response struct {
		Sessions []sessionJSON `json:"sessions"`
	}
	return route(log, withSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		list, err := users.Sessions(r.Context(), token)
		if err != nil {
			return nil, err
		}
		return response{Sessions: sessionsJSON(list)}, nil
	})
}

// handleEndSession ends one session of the bearer's account: 204, 401
// for a token of no session, or 404 for an ID that names no live session
// of the account.
func handleEndSession(users Users, log *slog.Logger) http.HandlerFunc {
	return route(log, withSession, http.StatusNoContent, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		return nil, users.EndSession(r.Context(), token, pathID(r, "id"))
	})
}

// handleEndOtherSessions ends every session of the bearer's account but
// the bearer's own, and says how many it ended.
func handleEndOtherSessions(users Users, log *slog.Logger) http.HandlerFunc {
	type response struct {
		Ended int `json:"ended"`
	}
	return route(log, withSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, token string, _ noBody) (any, error) {
		n, err := users.EndOtherSessions(r.Context(), token)
		if err != nil {
			return nil, err
		}
		return response{Ended: n}, nil
	})
}

// handleUndoEmailChange uses the code mailed to the address a change left:
// 200 with the user at that address again.
func handleUndoEmailChange(users Users, log *slog.Logger) http.HandlerFunc {
	return route(log, withoutSession, http.StatusOK, func(_ http.ResponseWriter, r *http.Request, _ string, req codeRequest) (any, error) {
		u, err := users.UndoEmailChange(r.Context(), req.Code)
		if err != nil {
			return nil, err
		}
		return toJSON(u, true), nil
	})
}

// plainName returns s when it is a short name of letters, digits, spaces,
// dots and dashes, and "" otherwise.
func plainName(s string) string {
	if len(s) > 40 {
		return ""
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune(" .-_", r) {
			return ""
		}
	}
	return strings.TrimSpace(s)
}
