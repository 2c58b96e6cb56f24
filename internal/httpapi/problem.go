package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/eventsourced/accounts/internal/requestid"
)

// Problem is an error response in the form of RFC 9457
// (application/problem+json). Type is stable per kind of error, so clients
// can branch on it; Detail is for people. RequestID, an extension member,
// is the request's ID, as its X-Request-Id header gives it, for a person
// who reports the error to quote.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"request_id"`
}

// The problem types of the API.
const (
	TypeBadRequest           = "/problems/bad-request"
	TypeBodyTooLarge         = "/problems/body-too-large"
	TypeUnsupportedMediaType = "/problems/unsupported-media-type"
	TypeBadEmail             = "/problems/bad-email"
	TypeInvalidCode          = "/problems/invalid-code"
	TypeUnauthenticated      = "/problems/unauthenticated"
	TypeEmailTaken           = "/problems/email-taken"
	TypeTooManyRequests      = "/problems/too-many-requests"
	TypeNotFound             = "/problems/not-found"
	TypeMethodNotAllowed     = "/problems/method-not-allowed"
	TypeNotReady             = "/problems/not-ready"
	TypeBusy                 = "/problems/busy"
	TypeUnavailable          = "/problems/unavailable"
	TypeInternal             = "/problems/internal"
)

var titles = map[string]string{
	TypeBadRequest:           "The request is malformed.",
	TypeBodyTooLarge:         "The request body is too large.",
	TypeUnsupportedMediaType: "The request body must be JSON.",
	TypeBadEmail:             "That is not an email address.",
	TypeInvalidCode:          "The code is unknown, used or expired.",
	TypeUnauthenticated:      "Sign in first.",
	TypeEmailTaken:           "That address belongs to an account already.",
	TypeTooManyRequests:      "Too many requests; try again later.",
	TypeNotFound:             "There is nothing here.",
	TypeMethodNotAllowed:     "That method is not allowed here.",
	TypeNotReady:             "The service is not ready.",
	TypeBusy:                 "The service is busy; try again.",
	TypeUnavailable:          "The database is unavailable; try again shortly.",
	TypeInternal:             "Something went wrong on our side.",
}

// writeProblem writes a problem of typ with status and detail, in answer
// to r.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, typ, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{Type: typ, Title: titles[typ], Status: status, Detail: detail,
		RequestID: requestid.From(r.Context())})
}

// writeTooMany writes a 429 problem with Retry-After in whole seconds.
func writeTooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, detail string) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
	writeProblem(w, r, http.StatusTooManyRequests, TypeTooManyRequests, detail)
}

// retryAfterSeconds rounds wait up to the whole seconds of Retry-After,
// at least 1.
func retryAfterSeconds(wait time.Duration) int {
	return max(int((wait+time.Second-1)/time.Second), 1)
}

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
