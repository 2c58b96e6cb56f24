package main

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

// TestOrganizationsThroughTheApp runs the whole app on each backend: an
// owner creates an organization and invites an address by mail, whose
// account sees what the code offers and accepts, and a second
// invitation is past INVITATION_LIMIT; the owner deletes their account,
// and the erasure, which the app wires to the organizations, leaves the
// member as the owner, and no row of the database, the organization's
// events included, holds the owner's address.
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
	app := e2eStart(t, database.mailing(mx, map[string]string{
		// One invitation an organization a day: the second is refused.
		"INVITATION_LIMIT":  "1",
		"INVITATION_WINDOW": "24h",
	}))
	mails := &e2eMails{mx: mx}
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

	ada, bob, id, code := inviteBob(t, app, mails)
	app.expect(t, "POST", "/v1/orgs/"+id.String()+"/invitations", ada.Token, `{"email":"cy@example.com","role":"member"}`, http.StatusTooManyRequests, nil)
	app.expect(t, "POST", "/v1/invitations", bob.Token, e2eJSON(t, map[string]string{"code": code}), http.StatusOK, nil)
	// Once used, the code offers nothing.
	app.expect(t, "POST", "/v1/invitations/offer", "", e2eJSON(t, map[string]string{"code": code}), http.StatusBadRequest, nil)
	if got := members(bob.Token, id); len(got) != 2 || got[0] != (member{"ada@example.com", "owner"}) || got[1] != (member{"bob@example.com", "member"}) {
		t.Fatalf("the members are %+v, want Ada the owner and Bob", got)
	}
	if !strings.Contains(dumpDatabase(t, database.Direct), "ada@example.com") {
		t.Fatal("the dump holds no ada@example.com before the erasure: it cannot tell")
	}

	app.expect(t, "DELETE", "/v1/me", ada.Token, "", http.StatusNoContent, nil)
	if got := members(bob.Token, id); len(got) != 1 || got[0] != (member{"bob@example.com", "owner"}) {
		t.Errorf("the members after the owner's erasure are %+v, want Bob, its owner now", got)
	}
	awaitDump(t, database.Direct, "the activity to drop Ada's", func(d string) bool { return !strings.Contains(d, "ada@") })
}

// inviteBob signs Ada and Bob in, has Ada create Analytical Engines and
// invite Bob as a member, and checks what the mailed code offers, which
// is told without a session and uses nothing up. It returns both
// sessions, the organization's ID and the code, unused.
func inviteBob(t *testing.T, app *e2eApp, mails *e2eMails) (ada, bob e2eSession, id uuid.UUID, code string) {
	t.Helper()
	ada, bob = app.signIn(t, mails, "ada@example.com"), app.signIn(t, mails, "bob@example.com")
	var o struct {
		ID uuid.UUID `json:"id"`
	}
	app.expect(t, "POST", "/v1/orgs", ada.Token, `{"name":"Analytical Engines"}`, http.StatusCreated, &o)
	app.expect(t, "POST", "/v1/orgs/"+o.ID.String()+"/invitations", ada.Token, `{"email":"bob@example.com","role":"member"}`, http.StatusAccepted, nil)
	code = mails.nextCode(t, "bob@example.com", "/invitations")
	var offer struct {
		Organization struct {
			ID   uuid.UUID `json:"id"`
			Name string    `json:"name"`
		} `json:"organization"`
		Role  string `json:"role"`
		Email string `json:"email"`
	}
	app.expect(t, "POST", "/v1/invitations/offer", "", e2eJSON(t, map[string]string{"code": code}), http.StatusOK, &offer)
	if offer.Organization.ID != o.ID || offer.Organization.Name != "Analytical Engines" || offer.Role != "member" || offer.Email != "bob@example.com" {
		t.Errorf("the invitation offers %+v, want Bob a membership of the new organization", offer)
	}
	return ada, bob, o.ID, code
}

// TestOrganizationsActivityThroughTheApp runs the whole app on each
// backend: a member's join, change of role and leave show in the
// member's activity, through the API and on the account page, and in no
// one else's, and `app projections rebuild activity` makes them again,
// the same.
func TestOrganizationsActivityThroughTheApp(t *testing.T) {
	t.Parallel()
	for name, database := range e2eDatabases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			organizationsActivity(t, database(t))
		})
	}
}

func organizationsActivity(t *testing.T, database e2eDatabase) {
	mx := smtptest.NewServer(t)
	env := database.mailing(mx, map[string]string{
		"HTTP_RATE_LIMIT": "0", // The activity is polled.
	})
	app := e2eStart(t, env)
	mails := &e2eMails{mx: mx}
	type item struct {
		Type   string    `json:"type"`
		At     time.Time `json:"at"`
		Detail string    `json:"detail"`
	}
	// orgItems returns the account's activity of organizations, once it
	// holds n such items and the projection has caught up.
	orgItems := func(token string, n int) []item {
		t.Helper()
		deadline := time.After(e2eWait)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var p struct {
				Items  []item `json:"items"`
				Behind int64  `json:"behind"`
			}
			app.expect(t, "GET", "/v1/me/activity?limit=100", token, "", http.StatusOK, &p)
			var items []item
			for _, it := range p.Items {
				if strings.HasPrefix(it.Type, "org_") {
					items = append(items, it)
				}
			}
			if len(items) >= n && p.Behind == 0 {
				return items
			}
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("the activity holds %+v after %s, want %d items of organizations", p, e2eWait, n)
			}
		}
	}

	ada, bob, id, code := inviteBob(t, app, mails)
	app.expect(t, "POST", "/v1/invitations", bob.Token, e2eJSON(t, map[string]string{"code": code}), http.StatusOK, nil)
	// Once used, the code offers nothing.
	app.expect(t, "POST", "/v1/invitations/offer", "", e2eJSON(t, map[string]string{"code": code}), http.StatusBadRequest, nil)
	bobPath := "/v1/orgs/" + id.String() + "/members/" + bob.User.ID.String()
	app.expect(t, "PATCH", bobPath, ada.Token, `{"role":"owner"}`, http.StatusOK, nil)
	app.expect(t, "DELETE", bobPath, bob.Token, "", http.StatusNoContent, nil)

	engines := id.String()
	types := func(items []item) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Type+" "+it.Detail)
		}
		return out
	}
	bobs := orgItems(bob.Token, 3)
	want := []string{
		"org_left " + engines + " Analytical Engines",
		"org_role_changed " + engines + " owner Analytical Engines",
		"org_joined " + engines + " member Analytical Engines",
	}
	if got := types(bobs); !slices.Equal(got, want) {
		t.Errorf("Bob's activity of organizations:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	adas := orgItems(ada.Token, 1)
	if got, want := types(adas), []string{"org_created " + engines + " owner Analytical Engines"}; !slices.Equal(got, want) {
		t.Errorf("Ada's activity of organizations: %q, want %q", got, want)
	}

	req, err := http.NewRequestWithContext(t.Context(), "GET", app.base+"/account", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "session", Value: bob.Token})
	resp, err := app.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /account: %d, %v", resp.StatusCode, err)
	}
	for _, line := range []string{
		"Left the organization Analytical Engines",
		"Made an owner of the organization Analytical Engines",
		"Joined the organization Analytical Engines as a member",
	} {
		if !strings.Contains(string(page), "<span>"+line+"</span>") {
			t.Errorf("Bob's account page lacks %q:\n%s", line, page)
		}
	}

	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"projections", "rebuild", "activity"}, getenv(env), &stdout, &stderr); err != nil {
		t.Fatalf("rebuild: %v\n%s", err, stderr.String())
	}
	if got := orgItems(bob.Token, 3); !slices.Equal(got, bobs) {
		t.Errorf("Bob's activity of organizations rebuilt:\n%+v\nwant as it was:\n%+v", got, bobs)
	}
	if got := orgItems(ada.Token, 1); !slices.Equal(got, adas) {
		t.Errorf("Ada's activity of organizations rebuilt: %+v, want as it was: %+v", got, adas)
	}
}
