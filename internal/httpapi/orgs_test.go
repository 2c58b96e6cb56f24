package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/uow"
)

// orgAPI sends requests to the API over fakeUsers and an organizations
// domain.
type orgAPI struct {
	h http.Handler
}

func newOrgAPI(orgs httpapi.Orgs) orgAPI {
	return orgAPI{h: httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, Orgs: orgs, Now: func() time.Time { return start }})}
}

// send sends method path with token as its bearer (none when "") and body
// as JSON (none when "").
func (a orgAPI) send(t *testing.T, method, path, token, body string) response {
	t.Helper()
	header := map[string]string{}
	if token != "" {
		header["Authorization"] = "Bearer " + token
	}
	if body != "" {
		header["Content-Type"] = "application/json"
	}
	return serve(t, a.h, method, path, "", header, []byte(body))
}

// decodeStrict decodes body into v, refusing a field v does not have.
func decodeStrict(t *testing.T, what string, body []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: body %s: %v", what, body, err)
	}
}

func nameBody(name string) string { return `{"name":` + jsonString(name) + `}` }
func roleBody(role string) string { return `{"role":` + jsonString(role) + `}` }
func inviteBody(email, role string) string {
	return `{"email":` + jsonString(email) + `,"role":` + jsonString(role) + `}`
}

var (
	orgPath        = "/v1/orgs/" + fakeOrgID.String()
	otherOrgPath   = "/v1/orgs/" + fakeOtherOrgID.String()
	unknownOrgPath = "/v1/orgs/" + uuid.NewString()
	bobPath        = orgPath + "/members/" + fakeMember.UserID.String()
	adaPath        = orgPath + "/members/" + fakeUser.ID.String()
	invitationPath = orgPath + "/invitations/" + fakeInvitationID.String()
	validCode      = strings.Repeat("a", 32)
)

// organization is an organization as the API shows it.
type organization struct {
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	Role      string    `json:"role"`
}

// member is a member as the API shows it.
type member struct {
	UserID   uuid.UUID `json:"user_id"`
	Email    string    `json:"email"`
	Role     string    `json:"role"`
	JoinedAt time.Time `json:"joined_at"`
}

// TestOrgsOverTheAPI holds the organizations' routes to docs/api.md over
// the fake domain: each success and its body, each refusal of the domain
// with its problem, malformed IDs, strict input, and their absence when
// the service serves no organizations.
func TestOrgsOverTheAPI(t *testing.T) {
	t.Parallel()
	t.Run("successes", testOrgsSuccesses)
	t.Run("the domain's refusals", testOrgsRefusals)
	t.Run("malformed IDs", testOrgsMalformedIDs)
	t.Run("strict input", testOrgsStrictInput)
	t.Run("wrong methods", testOrgsWrongMethods)
	t.Run("an outage", testOrgsOutage)
	t.Run("the client limit", testOrgsClientLimit)
	t.Run("left out without Orgs", testOrgsLeftOut)
}

func testOrgsSuccesses(t *testing.T) {
	t.Parallel()
	var log calls
	a := newOrgAPI(fakeOrgs{calls: &log})

	r := a.send(t, "POST", "/v1/orgs", fakeToken, nameBody("  Acme Ünïcode "))
	wantStatus(t, "POST /v1/orgs", r, http.StatusCreated)
	var created organization
	decodeStrict(t, "POST /v1/orgs", r.body, &created)
	if created.ID != fakeOrgID || created.Name != "Acme Ünïcode" || created.Role != "owner" || !created.CreatedAt.Equal(start) {
		t.Errorf("POST /v1/orgs answered %+v", created)
	}
	if loc := r.header.Get("Location"); loc != orgPath {
		t.Errorf("POST /v1/orgs: Location %q, want %q", loc, orgPath)
	}
	wantKeys(t, "POST /v1/orgs", r.body, "id", "name", "created_at", "role")

	r = a.send(t, "GET", "/v1/orgs", fakeToken, "")
	wantStatus(t, "GET /v1/orgs", r, http.StatusOK)
	var list struct {
		Organizations []organization `json:"organizations"`
	}
	decodeStrict(t, "GET /v1/orgs", r.body, &list)
	if len(list.Organizations) != 2 || list.Organizations[0].ID != fakeOrgID || list.Organizations[1].Role != "member" || list.Organizations[1].Name != fakeOtherOrg.Name {
		t.Errorf("GET /v1/orgs answered %s", r.body)
	}

	r = a.send(t, "GET", orgPath, fakeToken, "")
	wantStatus(t, "GET /v1/orgs/{id}", r, http.StatusOK)
	wantKeys(t, "GET /v1/orgs/{id}", r.body, "id", "name", "created_at", "role", "members")
	var details struct {
		organization
		Members []member `json:"members"`
	}
	decodeStrict(t, "GET /v1/orgs/{id}", r.body, &details)
	if details.ID != fakeOrgID || details.Role != "owner" || len(details.Members) != 2 ||
		details.Members[1] != (member{UserID: fakeMember.UserID, Email: fakeMember.Email, Role: "member", JoinedAt: fakeMember.JoinedAt}) {
		t.Errorf("GET /v1/orgs/{id} answered %s", r.body)
	}

	r = a.send(t, "POST", orgPath+"/invitations", fakeToken, inviteBody(" Grace@Example.com ", "owner"))
	wantStatus(t, "POST /v1/orgs/{id}/invitations", r, http.StatusAccepted)
	if len(r.body) != 0 {
		t.Errorf("202 has body %q", r.body)
	}

	r = a.send(t, "GET", orgPath+"/invitations", fakeToken, "")
	wantStatus(t, "GET /v1/orgs/{id}/invitations", r, http.StatusOK)
	var invitations struct {
		Invitations []struct {
			ID        uuid.UUID `json:"id"`
			Email     string    `json:"email"`
			Role      string    `json:"role"`
			InvitedBy uuid.UUID `json:"invited_by"`
			SentAt    time.Time `json:"sent_at"`
			ExpiresAt time.Time `json:"expires_at"`
		} `json:"invitations"`
	}
	decodeStrict(t, "GET /v1/orgs/{id}/invitations", r.body, &invitations)
	if len(invitations.Invitations) != 1 {
		t.Fatalf("GET /v1/orgs/{id}/invitations answered %s", r.body)
	}
	if i := invitations.Invitations[0]; i.ID != fakeInvitationID || i.Email != fakeInvite.Email || i.Role != "member" ||
		i.InvitedBy != fakeUser.ID || !i.SentAt.Equal(fakeInvite.SentAt) || !i.ExpiresAt.Equal(fakeInvite.ExpiresAt) {
		t.Errorf("GET /v1/orgs/{id}/invitations answered %s", r.body)
	}

	wantStatus(t, "DELETE /v1/orgs/{id}/invitations/{invitation_id}", a.send(t, "DELETE", invitationPath, fakeToken, ""), http.StatusNoContent)

	r = a.send(t, "POST", "/v1/invitations", fakeToken, codeBody(validCode))
	wantStatus(t, "POST /v1/invitations", r, http.StatusOK)
	var membership struct {
		Organization organization `json:"organization"`
		UserID       uuid.UUID    `json:"user_id"`
		JoinedAt     time.Time    `json:"joined_at"`
	}
	decodeStrict(t, "POST /v1/invitations", r.body, &membership)
	if membership.Organization.ID != fakeOrgID || membership.Organization.Role != "member" || membership.UserID != fakeUser.ID || !membership.JoinedAt.Equal(start) {
		t.Errorf("POST /v1/invitations answered %s", r.body)
	}

	// What a code offers is told without a session, and uses nothing up.
	r = a.send(t, "POST", "/v1/invitations/offer", "", codeBody(validCode))
	wantStatus(t, "POST /v1/invitations/offer", r, http.StatusOK)
	wantKeys(t, "POST /v1/invitations/offer", r.body, "organization", "role", "email", "expires_at")
	var offer struct {
		Organization struct {
			ID   uuid.UUID `json:"id"`
			Name string    `json:"name"`
		} `json:"organization"`
		Role      string    `json:"role"`
		Email     string    `json:"email"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	decodeStrict(t, "POST /v1/invitations/offer", r.body, &offer)
	if offer.Organization.ID != fakeOrgID || offer.Organization.Name != fakeOrg.Name || offer.Role != "member" ||
		offer.Email != fakeUser.Email || !offer.ExpiresAt.Equal(start.Add(7*24*time.Hour)) || offer.ExpiresAt.Location() != time.UTC {
		t.Errorf("POST /v1/invitations/offer answered %s", r.body)
	}

	r = a.send(t, "PATCH", bobPath, fakeToken, roleBody("owner"))
	wantStatus(t, "PATCH /v1/orgs/{id}/members/{user_id}", r, http.StatusOK)
	var changed member
	decodeStrict(t, "PATCH /v1/orgs/{id}/members/{user_id}", r.body, &changed)
	if changed.UserID != fakeMember.UserID || changed.Role != "owner" || changed.Email != fakeMember.Email {
		t.Errorf("PATCH /v1/orgs/{id}/members/{user_id} answered %s", r.body)
	}

	wantStatus(t, "DELETE /v1/orgs/{id}/members/{user_id}", a.send(t, "DELETE", bobPath, fakeToken, ""), http.StatusNoContent)
	// Leaving is removing oneself, which a member may.
	wantStatus(t, "DELETE of oneself as a member", a.send(t, "DELETE", otherOrgPath+"/members/"+fakeUser.ID.String(), fakeToken, ""), http.StatusNoContent)
	wantStatus(t, "DELETE /v1/orgs/{id}", a.send(t, "DELETE", orgPath, fakeToken, ""), http.StatusNoContent)

	want := []string{
		"Create Acme Ünïcode",
		"Invite " + fakeOrgID.String() + " grace@example.com owner",
		"Revoke " + fakeOrgID.String() + " " + fakeInvitationID.String(),
		"Accept " + validCode,
		"ChangeRole " + fakeOrgID.String() + " " + fakeMember.UserID.String() + " owner",
		"RemoveMember " + fakeOrgID.String() + " " + fakeMember.UserID.String(),
		"RemoveMember " + fakeOtherOrgID.String() + " " + fakeUser.ID.String(),
		"Delete " + fakeOrgID.String(),
	}
	if got := log.take(); !slices.Equal(got, want) {
		t.Errorf("the domain was asked\n%q\nwant\n%q", got, want)
	}
}

// testOrgsRefusals: each error of the domain is answered with its status
// and problem type, a detail that names no Go package, and the headers its
// status needs; nothing is done.
func testOrgsRefusals(t *testing.T) {
	t.Parallel()
	var log calls
	a := newOrgAPI(fakeOrgs{calls: &log})
	for _, c := range []struct {
		what, method, path, token, body string
		status                          int
		typ                             string
		// detail, when set, is the detail the problem must give.
		detail string
	}{
		{"an empty name", "POST", "/v1/orgs", fakeToken, nameBody("   "), 400, httpapi.TypeInvalidName, "invalid name: 0 characters"},
		{"a long name", "POST", "/v1/orgs", fakeToken, nameBody(strings.Repeat("é", 101)), 400, httpapi.TypeInvalidName, "invalid name: 101 characters"},
		{"a name with a control character", "POST", "/v1/orgs", fakeToken, nameBody("Ac\x07me"), 400, httpapi.TypeInvalidName, ""},
		{"one organization too many", "POST", "/v1/orgs", fakeToken, nameBody("Too many"), 409, httpapi.TypeTooManyOrganizations, ""},
		{"creating without a session", "POST", "/v1/orgs", "nope", nameBody("Acme"), 401, httpapi.TypeUnauthenticated, ""},
		{"listing without a session", "GET", "/v1/orgs", "nope", "", 401, httpapi.TypeUnauthenticated, ""},
		{"an organization of others", "GET", unknownOrgPath, fakeToken, "", 404, httpapi.TypeNotFound, ""},
		{"an organization without a session", "GET", orgPath, "nope", "", 401, httpapi.TypeUnauthenticated, ""},
		{"inviting a bad address", "POST", orgPath + "/invitations", fakeToken, inviteBody("nope", "member"), 400, httpapi.TypeBadEmail, `not an email address: "nope"`},
		{"inviting with a bad role", "POST", orgPath + "/invitations", fakeToken, inviteBody("grace@example.com", "admin"), 400, httpapi.TypeInvalidRole, `invalid role: "admin" is neither owner nor member`},
		{"inviting as a member", "POST", otherOrgPath + "/invitations", fakeToken, inviteBody("grace@example.com", "member"), 403, httpapi.TypeNotOwner, ""},
		{"inviting to an organization of others", "POST", unknownOrgPath + "/invitations", fakeToken, inviteBody("grace@example.com", "member"), 404, httpapi.TypeNotFound, ""},
		{"inviting a member", "POST", orgPath + "/invitations", fakeToken, inviteBody("BOB@example.com", "member"), 409, httpapi.TypeAlreadyMember, ""},
		{"inviting into a full organization", "POST", orgPath + "/invitations", fakeToken, inviteBody("full@example.com", "member"), 409, httpapi.TypeOrganizationFull, ""},
		{"inviting too often", "POST", orgPath + "/invitations", fakeToken, inviteBody("limited@example.com", "member"), 429, httpapi.TypeTooManyRequests, ""},
		{"inviting without a session", "POST", orgPath + "/invitations", "nope", inviteBody("grace@example.com", "member"), 401, httpapi.TypeUnauthenticated, ""},
		{"invitations to a member", "GET", otherOrgPath + "/invitations", fakeToken, "", 403, httpapi.TypeNotOwner, ""},
		{"invitations of others", "GET", unknownOrgPath + "/invitations", fakeToken, "", 404, httpapi.TypeNotFound, ""},
		{"revoking an unknown invitation", "DELETE", orgPath + "/invitations/" + uuid.NewString(), fakeToken, "", 404, httpapi.TypeNotFound, ""},
		{"revoking as a member", "DELETE", otherOrgPath + "/invitations/" + fakeInvitationID.String(), fakeToken, "", 403, httpapi.TypeNotOwner, ""},
		{"revoking without a session", "DELETE", invitationPath, "nope", "", 401, httpapi.TypeUnauthenticated, ""},
		{"accepting a bad code", "POST", "/v1/invitations", fakeToken, codeBody("nope"), 400, httpapi.TypeInvalidCode, ""},
		{"accepting another address's invitation", "POST", "/v1/invitations", fakeToken, codeBody("wrong" + validCode[5:]), 403, httpapi.TypeWrongAddress, ""},
		{"accepting as a member", "POST", "/v1/invitations", fakeToken, codeBody("member" + validCode[6:]), 409, httpapi.TypeAlreadyMember, ""},
		{"accepting into a full organization", "POST", "/v1/invitations", fakeToken, codeBody("full" + validCode[4:]), 409, httpapi.TypeOrganizationFull, ""},
		{"accepting one organization too many", "POST", "/v1/invitations", fakeToken, codeBody("many" + validCode[4:]), 409, httpapi.TypeTooManyOrganizations, ""},
		{"accepting without a session", "POST", "/v1/invitations", "nope", codeBody(validCode), 401, httpapi.TypeUnauthenticated, ""},
		{"the offer of a bad code", "POST", "/v1/invitations/offer", "", codeBody("nope"), 400, httpapi.TypeInvalidCode, ""},
		{"the offer of no code", "POST", "/v1/invitations/offer", "", codeBody(""), 400, httpapi.TypeInvalidCode, ""},
		{"a bad role", "PATCH", bobPath, fakeToken, roleBody("Owner"), 400, httpapi.TypeInvalidRole, `invalid role: "Owner" is neither owner nor member`},
		{"demoting the last owner", "PATCH", adaPath, fakeToken, roleBody("member"), 409, httpapi.TypeLastOwner, ""},
		{"changing a role as a member", "PATCH", otherOrgPath + "/members/" + fakeMember.UserID.String(), fakeToken, roleBody("owner"), 403, httpapi.TypeNotOwner, ""},
		{"changing the role of no member", "PATCH", orgPath + "/members/" + uuid.NewString(), fakeToken, roleBody("owner"), 404, httpapi.TypeNotFound, ""},
		{"changing a role without a session", "PATCH", bobPath, "nope", roleBody("owner"), 401, httpapi.TypeUnauthenticated, ""},
		{"the last owner leaving", "DELETE", adaPath, fakeToken, "", 409, httpapi.TypeLastOwner, ""},
		{"removing as a member", "DELETE", otherOrgPath + "/members/" + fakeMember.UserID.String(), fakeToken, "", 403, httpapi.TypeNotOwner, ""},
		{"removing no member", "DELETE", orgPath + "/members/" + uuid.NewString(), fakeToken, "", 404, httpapi.TypeNotFound, ""},
		{"removing without a session", "DELETE", bobPath, "nope", "", 401, httpapi.TypeUnauthenticated, ""},
		{"deleting as a member", "DELETE", otherOrgPath, fakeToken, "", 403, httpapi.TypeNotOwner, ""},
		{"deleting an organization of others", "DELETE", unknownOrgPath, fakeToken, "", 404, httpapi.TypeNotFound, ""},
		{"deleting without a session", "DELETE", orgPath, "", "", 401, httpapi.TypeUnauthenticated, ""},
	} {
		r := a.send(t, c.method, c.path, c.token, c.body)
		what := c.what + " (" + c.method + " " + c.path + ")"
		p := wantProblem(t, what, r, c.status, c.typ)
		if packagePrefix.MatchString(p.Detail) || strings.Contains(p.Detail, "org: ") {
			t.Errorf("%s: detail %q names a Go package", what, p.Detail)
		}
		if c.detail != "" && p.Detail != c.detail {
			t.Errorf("%s: detail %q, want %q", what, p.Detail, c.detail)
		}
		switch c.status {
		case http.StatusUnauthorized:
			wantUnauthenticated(t, what, r)
		case http.StatusTooManyRequests:
			// The domain says 30m and a millisecond: whole seconds, up.
			if wait := wantRetryAfter(t, what, r); wait != 30*time.Minute+time.Second {
				t.Errorf("%s: Retry-After %s, want 30m1s", what, wait)
			}
		}
	}
	if got := log.take(); len(got) != 0 {
		t.Errorf("refused requests did %q", got)
	}

	// A code that does not work is answered by the offer exactly as by
	// the acceptance, so that neither tells more of it than the other.
	for _, code := range []string{"nope", "", strings.ToUpper(validCode) + "x"} {
		accepted := parseOrgProblem(t, "accepting "+jsonString(code), a.send(t, "POST", "/v1/invitations", fakeToken, codeBody(code)))
		offered := parseOrgProblem(t, "the offer of "+jsonString(code), a.send(t, "POST", "/v1/invitations/offer", "", codeBody(code)))
		if offered != accepted {
			t.Errorf("the offer of %s answered %+v, the acceptance %+v", jsonString(code), offered, accepted)
		}
	}
}

// parseOrgProblem returns r's problem without its request ID, which is
// each request's own.
func parseOrgProblem(t *testing.T, what string, r response) httpapi.Problem {
	t.Helper()
	p, _ := parseProblem(t, what, r)
	p.RequestID = ""
	return p
}

// testOrgsMalformedIDs: an ID in the path that is no UUID names nothing:
// 404 once the token is checked, and 401 without a session, as for a
// well-formed ID of nothing.
func testOrgsMalformedIDs(t *testing.T) {
	t.Parallel()
	var log calls
	a := newOrgAPI(fakeOrgs{calls: &log})
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/orgs/not-an-id", ""},
		{"DELETE", "/v1/orgs/not-an-id", ""},
		{"GET", "/v1/orgs/" + fakeOrgID.String() + "x", ""},
		{"GET", "/v1/orgs/" + strings.ToUpper(fakeOrgID.String()[:8]) + "-zzzz" + fakeOrgID.String()[13:], ""},
		{"POST", "/v1/orgs/not-an-id/invitations", inviteBody("grace@example.com", "member")},
		{"GET", "/v1/orgs/not-an-id/invitations", ""},
		{"DELETE", "/v1/orgs/not-an-id/invitations/" + fakeInvitationID.String(), ""},
		{"DELETE", orgPath + "/invitations/not-an-id", ""},
		{"PATCH", "/v1/orgs/not-an-id/members/" + fakeMember.UserID.String(), roleBody("owner")},
		{"PATCH", orgPath + "/members/not-an-id", roleBody("owner")},
		{"DELETE", "/v1/orgs/not-an-id/members/" + fakeMember.UserID.String(), ""},
		{"DELETE", orgPath + "/members/not-an-id", ""},
		{"DELETE", orgPath + "/members/%20", ""},
	} {
		what := c.method + " " + c.path
		wantProblem(t, what, a.send(t, c.method, c.path, fakeToken, c.body), http.StatusNotFound, httpapi.TypeNotFound)
		wantUnauthenticated(t, what+" with a token of no session", a.send(t, c.method, c.path, "nope", c.body))
	}
	if got := log.take(); len(got) != 0 {
		t.Errorf("requests with malformed IDs did %q", got)
	}
}

// testOrgsStrictInput: the bodies of the organizations' routes are decoded
// as every other body of the API, and a request without a token is 401
// before its body is read, but for the offer, which needs no session.
func testOrgsStrictInput(t *testing.T) {
	t.Parallel()
	var log calls
	a := newOrgAPI(fakeOrgs{calls: &log})
	for _, c := range []struct {
		method, path, good string
		// open says that the route needs no session.
		open bool
	}{
		{"POST", "/v1/orgs", nameBody("Acme"), false},
		{"POST", orgPath + "/invitations", inviteBody("grace@example.com", "member"), false},
		{"POST", "/v1/invitations", codeBody(validCode), false},
		{"POST", "/v1/invitations/offer", codeBody(validCode), true},
		{"PATCH", bobPath, roleBody("owner"), false},
	} {
		what := c.method + " " + c.path
		inner := strings.TrimSuffix(strings.TrimPrefix(c.good, "{"), "}")
		for _, body := range []string{
			"",
			"null",
			"[" + c.good + "]",
			`{` + inner + `,"extra":1}`,
			strings.ToUpper(c.good[:3]) + c.good[3:],
			`{` + inner + `,` + inner + `}`,
			c.good + " x",
			c.good + c.good,
			`{"name":5,"email":5,"code":5,"role":5}`,
		} {
			r := serve(t, a.h, c.method, c.path, "", map[string]string{"Authorization": "Bearer " + fakeToken, "Content-Type": "application/json"}, []byte(body))
			wantProblem(t, what+" with "+jsonString(body), r, http.StatusBadRequest, httpapi.TypeBadRequest)
		}
		r := serve(t, a.h, c.method, c.path, "", map[string]string{"Authorization": "Bearer " + fakeToken, "Content-Type": "text/plain"}, []byte(c.good))
		wantProblem(t, what+" as text/plain", r, http.StatusUnsupportedMediaType, httpapi.TypeUnsupportedMediaType)
		big := strings.Replace(c.good, `":"`, `":"`+strings.Repeat(" ", 5000), 1)
		r = serve(t, a.h, c.method, c.path, "", map[string]string{"Authorization": "Bearer " + fakeToken, "Content-Type": "application/json"}, []byte(big))
		wantProblem(t, what+" over 4 KiB", r, http.StatusRequestEntityTooLarge, httpapi.TypeBodyTooLarge)
		if c.open {
			// Without a token the body is read all the same.
			wantProblem(t, what+" without a token", serve(t, a.h, c.method, c.path, "", map[string]string{"Content-Type": "text/plain"}, []byte("x")),
				http.StatusUnsupportedMediaType, httpapi.TypeUnsupportedMediaType)
		} else {
			// Without a token the body is not read.
			wantUnauthenticated(t, what+" without a token", serve(t, a.h, c.method, c.path, "", map[string]string{"Content-Type": "text/plain"}, []byte("x")))
		}
		wantProblem(t, what+" with a malformed query", a.send(t, c.method, c.path+"?%zz", fakeToken, c.good), http.StatusBadRequest, httpapi.TypeBadRequest)
	}
	if got := log.take(); len(got) != 0 {
		t.Errorf("refused bodies did %q", got)
	}
}

// testOrgsWrongMethods: a path of the organizations answers a method it
// does not take with 405 and Allow.
func testOrgsWrongMethods(t *testing.T) {
	t.Parallel()
	a := newOrgAPI(fakeOrgs{})
	for _, c := range []struct{ path, allowed string }{
		{"/v1/orgs", "POST, GET"},
		{orgPath, "GET, DELETE"},
		{orgPath + "/invitations", "POST, GET"},
		{invitationPath, "DELETE"},
		{bobPath, "PATCH, DELETE"},
		{"/v1/invitations", "POST"},
		{"/v1/invitations/offer", "POST"},
	} {
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if slices.Contains(strings.Split(c.allowed, ", "), method) {
				continue
			}
			r := a.send(t, method, c.path, fakeToken, "")
			what := method + " " + c.path
			wantProblem(t, what, r, http.StatusMethodNotAllowed, httpapi.TypeMethodNotAllowed)
			for _, m := range strings.Split(c.allowed, ", ") {
				if !allows(r.header.Get("Allow"), m) {
					t.Errorf("%s: Allow %q, want it to list %s", what, r.header.Get("Allow"), m)
				}
			}
		}
	}
}

// unavailableOrgs is an organizations domain whose database is gone.
type unavailableOrgs struct{ fakeOrgs }

func (unavailableOrgs) Create(context.Context, string, string) (org.Organization, error) {
	return org.Organization{}, uow.ErrUnavailable
}
func (unavailableOrgs) List(context.Context, string) ([]org.Organization, error) {
	return nil, uow.ErrUnavailable
}
func (unavailableOrgs) Get(context.Context, string, uuid.UUID) (org.Details, error) {
	return org.Details{}, uow.ErrUnavailable
}
func (unavailableOrgs) Offer(context.Context, string) (org.InvitationOffer, error) {
	return org.InvitationOffer{}, uow.ErrUnavailable
}
func (unavailableOrgs) Accept(context.Context, string, string) (org.Membership, error) {
	return org.Membership{}, uow.ErrUnavailable
}
func (unavailableOrgs) RemoveMember(context.Context, string, uuid.UUID, uuid.UUID) error {
	return uow.ErrUnavailable
}

// testOrgsOutage: while the database is gone the routes answer 503 with
// Retry-After, never 500.
func testOrgsOutage(t *testing.T) {
	t.Parallel()
	a := newOrgAPI(unavailableOrgs{})
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/orgs", nameBody("Acme")},
		{"GET", "/v1/orgs", ""},
		{"GET", orgPath, ""},
		{"POST", "/v1/invitations", codeBody(validCode)},
		{"POST", "/v1/invitations/offer", codeBody(validCode)},
	} {
		wantUnavailable(t, c.method+" "+c.path, a.send(t, c.method, c.path, fakeToken, c.body))
	}
}

// testOrgsClientLimit: the offer counts against a client's limit as the
// acceptance does, so that neither lets a client try codes faster than
// the other; over it each answers 429 with Retry-After, and the domain is
// not asked.
func testOrgsClientLimit(t *testing.T) {
	t.Parallel()
	var log calls
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, Orgs: fakeOrgs{calls: &log}, RateLimit: 1, Now: func() time.Time { return start }})
	header := map[string]string{"Authorization": "Bearer " + fakeToken, "Content-Type": "application/json"}
	for i, path := range []string{"/v1/invitations", "/v1/invitations/offer"} {
		remote := fmt.Sprintf("192.0.2.%d:1000", i+1)
		if r := serve(t, h, "POST", path, remote, header, []byte(codeBody("nope"))); r.status != http.StatusBadRequest {
			t.Errorf("POST %s within the limit: %d, want 400 of the code (%s)", path, r.status, r)
		}
		r := serve(t, h, "POST", path, remote, header, []byte(codeBody(validCode)))
		wantProblem(t, "POST "+path+" over the limit", r, http.StatusTooManyRequests, httpapi.TypeTooManyRequests)
		wantRetryAfter(t, "POST "+path+" over the limit", r)
	}
	if got := log.take(); len(got) != 0 {
		t.Errorf("requests over the limit did %q", got)
	}
}

// testOrgsLeftOut: a service that serves no organizations has none of
// their routes or pages, and its account page lists none.
func testOrgsLeftOut(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}})
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/orgs"}, {"POST", "/v1/orgs"}, {"GET", orgPath}, {"POST", "/v1/invitations"}, {"POST", "/v1/invitations/offer"},
		{"GET", "/orgs/" + fakeOrgID.String()}, {"GET", "/invitations?code=" + validCode}, {"POST", "/account/orgs"},
	} {
		// The document gives these routes, which this service does not
		// serve: its 404 is no answer of theirs.
		req := httptest.NewRequestWithContext(t.Context(), c.method, c.path, nil)
		req.Header.Set("Authorization", "Bearer "+fakeToken)
		req.Header.Set("Cookie", "session="+fakeToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		r := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		wantProblem(t, c.method+" "+c.path+" without Orgs", r, http.StatusNotFound, httpapi.TypeNotFound)
	}
	r := serve(t, h, "GET", "/account", "", map[string]string{"Cookie": "session=" + fakeToken}, nil)
	if r.status != http.StatusOK || strings.Contains(string(r.body), "organization") {
		t.Errorf("GET /account without Orgs: %d, want 200 and no organizations:\n%s", r.status, r.body)
	}
}
