package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

// TestOrganizationsThroughTheApp runs the whole app on each backend: an
// owner creates an organization and invites an address by mail, whose
// account accepts; the owner deletes their account, and the erasure,
// which the app wires to the organizations, leaves the member as the
// owner, and no row of the database, the organization's events
// included, holds the owner's address.
func TestOrganizationsThroughTheApp(t *testing.T) {
	t.Parallel()
	for name, database := range e2eDatabases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			organizations(t, database(t))
		})
	}
}

func organizations(t *testing.T, database e2eDatabase) {
	mx := smtptest.NewServer(t)
	app := e2eStart(t, database.env(map[string]string{
		"DATA_KEY":        testDataKey,
		"HTTP_ADDR":       "127.0.0.1:0",
		"SMTP_URL":        mx.URL(),
		"BASE_URL":        "http://accounts.test",
		"MAIL_FROM":       "accounts@accounts.test",
		"OUTBOX_INTERVAL": "1h", // Only wake-ups on commit can deliver in time.
	}))
	mails := &e2eMails{mx: mx}
	type session struct {
		Token string `json:"token"`
	}
	signIn := func(email string) session {
		t.Helper()
		app.expect(t, "POST", "/v1/sign-in-links", "", e2eJSON(t, map[string]string{"email": email}), http.StatusAccepted, nil)
		var s session
		app.expect(t, "POST", "/v1/sessions", "", e2eJSON(t, map[string]string{"code": mails.nextCode(t, email, "/sign-in")}), http.StatusCreated, &s)
		return s
	}
	type member struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	members := func(token string, id uuid.UUID) []member {
		t.Helper()
		var d struct {
			Members []member `json:"members"`
		}
		app.expect(t, "GET", "/v1/orgs/"+id.String(), token, "", http.StatusOK, &d)
		return d.Members
	}

	ada, bob := signIn("ada@example.com"), signIn("bob@example.com")
	var o struct {
		ID uuid.UUID `json:"id"`
	}
	app.expect(t, "POST", "/v1/orgs", ada.Token, `{"name":"Analytical Engines"}`, http.StatusCreated, &o)
	app.expect(t, "POST", "/v1/orgs/"+o.ID.String()+"/invitations", ada.Token, `{"email":"bob@example.com","role":"member"}`, http.StatusAccepted, nil)
	code := mails.nextCode(t, "bob@example.com", "/invitations")
	app.expect(t, "POST", "/v1/invitations", bob.Token, e2eJSON(t, map[string]string{"code": code}), http.StatusOK, nil)
	if got := members(bob.Token, o.ID); len(got) != 2 || got[0] != (member{"ada@example.com", "owner"}) || got[1] != (member{"bob@example.com", "member"}) {
		t.Fatalf("the members are %+v, want Ada the owner and Bob", got)
	}
	if !strings.Contains(dumpDatabase(t, database.Direct), "ada@example.com") {
		t.Fatal("the dump holds no ada@example.com before the erasure: it cannot tell")
	}

	app.expect(t, "DELETE", "/v1/me", ada.Token, "", http.StatusNoContent, nil)
	if got := members(bob.Token, o.ID); len(got) != 1 || got[0] != (member{"bob@example.com", "owner"}) {
		t.Errorf("the members after the owner's erasure are %+v, want Bob, its owner now", got)
	}
	awaitDump(t, database.Direct, "the activity to drop Ada's", func(d string) bool { return !strings.Contains(d, "ada@") })
}
