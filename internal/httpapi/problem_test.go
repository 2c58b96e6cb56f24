package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/user"
)

// packagePrefix is how a Go error's text starts: the name of the package
// that made it and a colon ("user: ", "json: ").
var packagePrefix = regexp.MustCompile(`^[a-z][a-z0-9]*: `)

// TestProblemDetails holds the detail of every problem type the API
// answers with to text for people: none starts with a Go package's
// prefix, though some quote an error of the domain.
func TestProblemDetails(t *testing.T) {
	t.Parallel()
	now := func() time.Time { return start }
	plain := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, Now: now})
	limited := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, RateLimit: 1, Now: now})
	orgs := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, Orgs: fakeOrgs{}, Now: now})
	authJSON := map[string]string{"Authorization": "Bearer " + fakeToken, "Content-Type": "application/json"}
	acme := "/v1/orgs/" + fakeOrgID.String()
	serve(t, limited, "GET", "/v1/me", "192.0.2.9:1000", nil, nil) // spends the one request a minute
	auth := map[string]string{"Authorization": "Bearer " + fakeToken}
	asJSON := map[string]string{"Content-Type": "application/json"}
	seen := map[string]bool{}
	for _, c := range []struct {
		name           string
		h              http.Handler
		method, target string
		header         map[string]string
		body           string
		typ            string
		// detail, when set, is the detail the problem must give.
		detail string
	}{
		{"malformed JSON", plain, "POST", "/v1/sessions", asJSON, `{"code":`, httpapi.TypeBadRequest, ""},
		{"an unknown field", plain, "POST", "/v1/sessions", asJSON, `{"cod":"x"}`, httpapi.TypeBadRequest, ""},
		{"a malformed query", plain, "GET", "/v1/me?a=%zz", auth, "", httpapi.TypeBadRequest, ""},
		{"a body too large", plain, "POST", "/v1/sessions", asJSON, codeBody(strings.Repeat("x", 5000)), httpapi.TypeBodyTooLarge, ""},
		{"not JSON", plain, "POST", "/v1/sessions", map[string]string{"Content-Type": "text/plain"}, "x", httpapi.TypeUnsupportedMediaType, ""},
		{"no email address", plain, "POST", "/v1/sign-in-links", asJSON, emailBody("nope"), httpapi.TypeBadEmail, `not an email address: "nope"`},
		{"an empty address", plain, "POST", "/v1/sign-in-links", asJSON, emailBody(" "), httpapi.TypeBadEmail, "not an email address: empty"},
		{"a bad email wrapped by another package", httpapi.NewServer(httpapi.Deps{Users: wrappedBadEmail{}}),
			"POST", "/v1/sign-in-links", asJSON, emailBody("ada@example.com"), httpapi.TypeBadEmail, "not an email address: no mail server for example.com"},
		{"an invalid code", plain, "POST", "/v1/sessions", asJSON, codeBody("x"), httpapi.TypeInvalidCode, ""},
		{"no session", plain, "GET", "/v1/me", nil, "", httpapi.TypeUnauthenticated, ""},
		{"the own address", plain, "POST", "/v1/me/email-change", map[string]string{"Authorization": auth["Authorization"], "Content-Type": "application/json"},
			newEmailBody(fakeUser.Email), httpapi.TypeEmailTaken, ""},
		{"too many links", plain, "POST", "/v1/sign-in-links", asJSON, emailBody("limited@example.com"), httpapi.TypeTooManyRequests, ""},
		{"too many requests", limited, "GET", "/v1/me", nil, "", httpapi.TypeTooManyRequests, ""},
		{"no route", plain, "GET", "/v1/nope", nil, "", httpapi.TypeNotFound, ""},
		{"a wrong method", plain, "PUT", "/v1/me", nil, "", httpapi.TypeMethodNotAllowed, ""},
		{"not ready", httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, Ready: func(context.Context) error { return errors.New("down") }}),
			"GET", "/readyz", nil, "", httpapi.TypeNotReady, ""},
		{"contention", httpapi.NewServer(httpapi.Deps{Users: contended{}}), "DELETE", "/v1/sessions/current", auth, "", httpapi.TypeBusy, ""},
		{"the database gone", httpapi.NewServer(httpapi.Deps{Users: unavailableUsers{}}), "GET", "/v1/me", auth, "", httpapi.TypeUnavailable, ""},
		{"an unforeseen error", httpapi.NewServer(httpapi.Deps{Users: panicky{}}), "DELETE", "/v1/sessions/current", auth, "", httpapi.TypeInternal, ""},
		{"a panic", httpapi.NewServer(httpapi.Deps{Users: panicky{}}), "GET", "/v1/me", auth, "", httpapi.TypeInternal, ""},
		{"an organization's bad name", orgs, "POST", "/v1/orgs", authJSON, nameBody(""), httpapi.TypeInvalidName, "invalid name: 0 characters"},
		{"a bad role", orgs, "POST", acme + "/invitations", authJSON, inviteBody("grace@example.com", "boss"), httpapi.TypeInvalidRole, `invalid role: "boss" is neither owner nor member`},
		{"an invited bad address", orgs, "POST", acme + "/invitations", authJSON, inviteBody("nope", "member"), httpapi.TypeBadEmail, `not an email address: "nope"`},
		{"too many invitations", orgs, "POST", acme + "/invitations", authJSON, inviteBody("limited@example.com", "member"), httpapi.TypeTooManyRequests, ""},
		{"an organization of others", orgs, "GET", "/v1/orgs/" + fakeInvitationID.String(), auth, "", httpapi.TypeNotFound, ""},
		{"not an owner", orgs, "DELETE", "/v1/orgs/" + fakeOtherOrgID.String(), auth, "", httpapi.TypeNotOwner, ""},
		{"another address's invitation", orgs, "POST", "/v1/invitations", authJSON, codeBody("wrong" + strings.Repeat("a", 27)), httpapi.TypeWrongAddress, ""},
		{"a member already", orgs, "POST", acme + "/invitations", authJSON, inviteBody("bob@example.com", "member"), httpapi.TypeAlreadyMember, ""},
		{"the last owner", orgs, "DELETE", acme + "/members/" + fakeUser.ID.String(), auth, "", httpapi.TypeLastOwner, ""},
		{"too many organizations", orgs, "POST", "/v1/orgs", authJSON, nameBody("too many"), httpapi.TypeTooManyOrganizations, ""},
		{"a full organization", orgs, "POST", "/v1/invitations", authJSON, codeBody("full" + strings.Repeat("a", 28)), httpapi.TypeOrganizationFull, ""},
		{"an invalid invitation code", orgs, "POST", "/v1/invitations", authJSON, codeBody("x"), httpapi.TypeInvalidCode, ""},
		{"the offer of an invalid invitation code", orgs, "POST", "/v1/invitations/offer", asJSON, codeBody("x"), httpapi.TypeInvalidCode, ""},
	} {
		r := serve(t, c.h, c.method, c.target, "192.0.2.9:1000", c.header, []byte(c.body))
		p, ok := parseProblem(t, c.name, r)
		if !ok {
			continue
		}
		if p.Type != c.typ {
			t.Errorf("%s: problem type %q, want %q (%s)", c.name, p.Type, c.typ, r)
		}
		seen[p.Type] = true
		if packagePrefix.MatchString(p.Detail) || strings.Contains(p.Detail, "user: ") || strings.Contains(p.Detail, "org: ") {
			t.Errorf("%s: %s detail %q names a Go package", c.name, p.Type, p.Detail)
		}
		if c.detail != "" && p.Detail != c.detail {
			t.Errorf("%s: %s detail %q, want %q", c.name, p.Type, p.Detail, c.detail)
		}
	}
	for _, typ := range slices.Sorted(maps.Keys(knownTypes)) {
		if !seen[typ] {
			t.Errorf("problem type %s was not tried", typ)
		}
	}
}

// wrappedBadEmail is a domain that refuses an address for a reason of
// another package, wrapped around the domain's error.
type wrappedBadEmail struct{ fakeUsers }

func (wrappedBadEmail) RequestSignInLink(context.Context, string) error {
	return fmt.Errorf("mxcheck: %w: no mail server for example.com", user.ErrBadEmail)
}
