package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/eventsourced/accounts/internal/requestid"
)

// Problem is an error response in the form of RFC 9457
// (application/problem+json). Type is stable per kind of error, so clients
// can branch on it; Detail is for people, and never starts with the name of
// a Go package ("user: "), even where it quotes an error. RequestID, an
// extension member, is the request's ID, as its X-Request-Id header gives
// it, for a person who reports the error to quote.
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

	// The problems of the organizations.
	TypeInvalidName          = "/problems/invalid-name"
	TypeInvalidRole          = "/problems/invalid-role"
	TypeNotOwner             = "/problems/not-owner"
	TypeWrongAddress         = "/problems/wrong-address"
	TypeAlreadyMember        = "/problems/already-member"
	TypeLastOwner            = "/problems/last-owner"
	TypeTooManyOrganizations = "/problems/too-many-organizations"
	TypeOrganizationFull     = "/problems/organization-full"
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
	TypeInvalidName:          "That is not a name for an organization.",
	TypeInvalidRole:          "A role is owner or member.",
	TypeNotOwner:             "Only the organization's owners may do that.",
	TypeWrongAddress:         "The invitation is for another address.",
	TypeAlreadyMember:        "That account is a member of the organization already.",
	TypeLastOwner:            "The organization's last owner cannot leave, be removed or stop being an owner.",
	TypeTooManyOrganizations: "That account belongs to too many organizations.",
	TypeOrganizationFull:     "The organization has as many members as it may hold.",
}

// writeProblem writes a problem of typ with status and detail, in answer
// to r.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, typ, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{Type: typ, Title: titles[typ], Status: status, Detail: publicDetail(detail),
		RequestID: requestid.From(r.Context())})
}

// publicDetail returns detail without the package prefixes it starts with.
// A Go error's text begins with the name of the package that made it
// ("user: not an email address: ..."), or a chain of them ("json: ..."),
// which tells a client of the service's insides and nothing of its
// request; a detail that quotes an error, the domain's or a library's, is
// written through here and so loses it, whichever error it is. A prefix is
// a lower-case word of letters and digits alone followed by ": ", the form
// of a package name; the API's own details never start with one.
func publicDetail(detail string) string {
	for {
		prefix, rest, ok := strings.Cut(detail, ": ")
		if !ok || !packageName(prefix) {
			return detail
		}
		detail = rest
	}
}

// packageName reports whether s has the form of a Go package's name: a
// lower-case letter, then lower-case letters and digits.
func packageName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s[1:]) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
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
