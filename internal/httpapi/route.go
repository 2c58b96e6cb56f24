package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/user"
)

// noBody is the request of a route that reads no body.
type noBody struct{}

// codeRequest is the body of the routes that take a mailed code: an
// invitation's, or one that moves an account's address.
type codeRequest struct {
	Code string `json:"code"`
}

// session says whether a route needs the bearer's session.
type session bool

const (
	withSession    session = true
	withoutSession session = false
)

// route returns the handler of a route of the JSON API, which differ only
// in what call asks of the domain and in the status of success. call gets
// the bearer's token and the request's body decoded into a Req; what it
// returns is answered as JSON with status, or status alone when it
// returns nil, and its error as the error's problem, a code that does not
// work ([user.ErrInvalidCode]) being a 400. A route [withSession] that
// reads a body answers 401 without a token before it reads the body; a
// route whose Req is [noBody] reads none, and leaves the token to the
// domain, which checks it before anything else.
func route[Req any](log *slog.Logger, s session, status int,
	call func(w http.ResponseWriter, r *http.Request, token string, req Req) (any, error),
) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token := bearer(r)
		var req Req
		if _, none := any(req).(noBody); !none {
			if s == withSession && token == "" {
				writeError(w, r, log, user.ErrUnauthenticated, 0)
				return
			}
			if err := decode(w, r, &req); err != nil {
				writeError(w, r, log, err, 0)
				return
			}
		}
		out, err := call(w, r, token, req)
		switch {
		case err != nil:
			writeError(w, r, log, err, http.StatusBadRequest)
		case out == nil:
			w.WriteHeader(status)
		default:
			writeJSON(w, status, out)
		}
	}
}

// pathID returns the UUID of r's path value name. A malformed one is
// uuid.Nil, which names nothing, so that the domain checks the token
// first for it too and then answers that nothing has that ID, as for a
// well-formed ID of nothing.
func pathID(r *http.Request, name string) uuid.UUID {
	id, err := uuid.Parse(r.PathValue(name))
	if err != nil {
		return uuid.Nil
	}
	return id
}
