package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// sessionList is the answer of GET /v1/me/sessions.
type sessionList struct {
	Sessions []struct {
		ID         uuid.UUID `json:"id"`
		StartedAt  time.Time `json:"started_at"`
		LastUsedAt time.Time `json:"last_used_at"`
		ExpiresAt  time.Time `json:"expires_at"`
		Client     string    `json:"client"`
		Current    bool      `json:"current"`
	} `json:"sessions"`
}

func (e *env) sessions(t *testing.T, token string) sessionList {
	t.Helper()
	r := e.get(t, "/v1/me/sessions", token)
	wantStatus(t, "GET /v1/me/sessions", r, http.StatusOK)
	var l sessionList
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("sessions %s: %v", r.body, err)
	}
	return l
}

// signInAs signs in to email with a User-Agent header.
func (e *env) signInAs(t *testing.T, email, userAgent string) session {
	t.Helper()
	code := e.link(t, email, email)
	r := e.send(t, request{method: http.MethodPost, path: "/v1/sessions", body: codeBody(code), header: map[string]string{"User-Agent": userAgent}})
	wantStatus(t, "POST /v1/sessions", r, http.StatusCreated)
	var s session
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSessionsOverTheAPI: the owner lists the account's sessions with a
// coarse description of each client, ends one, and signs out everywhere
// else; a session of another account, a malformed ID and a missing token
// are refused and change nothing.
func TestSessionsOverTheAPI(t *testing.T) {
	t.Parallel()
	e := setup(t)
	laptop := e.signInAs(t, "ada@example.com", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0")
	e.clock.Advance(time.Minute)
	phone := e.signInAs(t, "ada@example.com", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
	e.clock.Advance(time.Minute)
	script := e.signInAs(t, "ada@example.com", "curl/8.5.0")
	bob := e.signIn(t, "bob@example.com")

	l := e.sessions(t, laptop.Token)
	clients := map[string]bool{}
	var phoneID, laptopID uuid.UUID
	for _, s := range l.Sessions {
		clients[s.Client] = s.Current
		switch s.Client {
		case "Safari on iOS":
			phoneID = s.ID
		case "Firefox on Linux":
			laptopID = s.ID
		}
	}
	if len(l.Sessions) != 3 || !clients["Firefox on Linux"] || clients["Safari on iOS"] || clients["curl"] {
		t.Fatalf("GET /v1/me/sessions = %+v, want Ada's three, with the laptop's current", l)
	}
	bobsID := e.sessions(t, bob.Token).Sessions[0].ID

	before := e.snapshot(t)
	wantUnauthenticated(t, "GET /v1/me/sessions without a token", e.get(t, "/v1/me/sessions", ""))
	for what, path := range map[string]string{
		"another account's session": "/v1/me/sessions/" + bobsID.String(),
		"an unknown ID":             "/v1/me/sessions/" + uuid.NewString(),
		"a malformed ID":            "/v1/me/sessions/not-an-id",
	} {
		r := e.send(t, request{method: http.MethodDelete, path: path, token: laptop.Token})
		wantProblem(t, "DELETE of "+what, r, http.StatusNotFound, httpapi.TypeNotFound)
	}
	wantUnauthenticated(t, "DELETE /v1/me/sessions/{id} without a token",
		e.send(t, request{method: http.MethodDelete, path: "/v1/me/sessions/" + phoneID.String()}))
	// Whatever the ID, a token of no session is told so.
	for _, id := range []string{phoneID.String(), "not-an-id"} {
		wantUnauthenticated(t, "DELETE /v1/me/sessions/"+id+" with a token of no session",
			e.send(t, request{method: http.MethodDelete, path: "/v1/me/sessions/" + id, token: "nonsense"}))
	}
	e.unchanged(t, "refused ends", before)

	r := e.send(t, request{method: http.MethodDelete, path: "/v1/me/sessions/" + phoneID.String(), token: laptop.Token})
	wantStatus(t, "DELETE /v1/me/sessions/{phone}", r, http.StatusNoContent)
	wantUnauthenticated(t, "the phone after its end", e.get(t, "/v1/me", phone.Token))

	r = e.send(t, request{method: http.MethodDelete, path: "/v1/me/sessions", token: laptop.Token})
	wantStatus(t, "DELETE /v1/me/sessions", r, http.StatusOK)
	if string(r.body) != `{"ended":1}`+"\n" && string(r.body) != `{"ended":1}` {
		t.Errorf("DELETE /v1/me/sessions answered %s, want {\"ended\":1}", r.body)
	}
	wantUnauthenticated(t, "the script after sign-out everywhere else", e.get(t, "/v1/me", script.Token))
	e.me(t, laptop.Token)
	e.me(t, bob.Token)

	r = e.send(t, request{method: http.MethodDelete, path: "/v1/me/sessions/" + laptopID.String(), token: laptop.Token})
	wantStatus(t, "DELETE of the caller's own session", r, http.StatusNoContent)
	wantUnauthenticated(t, "the laptop after ending itself", e.get(t, "/v1/me", laptop.Token))
}

// TestUndoEmailChangeOverTheAPI: the code mailed to the address a change
// left moves the account back, once, and ends every session; a used code,
// a code whose address another account took since (409) and a code of an
// erased account are refused and change nothing.
func TestUndoEmailChangeOverTheAPI(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ada := e.signIn(t, "ada@example.com")
	other := e.signIn(t, "ada@example.com")
	wantStatus(t, "email change", e.post(t, "/v1/me/email-change", ada.Token, newEmailBody("ada@example.net")), http.StatusAccepted)
	change := e.oneMail(t, mail.TopicEmailChange, "ada@example.net", "/confirm-email")
	wantStatus(t, "confirm", e.post(t, "/v1/email-changes", ada.Token, codeBody(change)), http.StatusOK)
	undo := e.oneMail(t, mail.TopicEmailChanged, "ada@example.com", "/undo-email")
	wantUnauthenticated(t, "the other session after the confirmation", e.get(t, "/v1/me", other.Token))
	if got := e.me(t, ada.Token).Email; got != "ada@example.net" {
		t.Fatalf("the confirming session sees %q, want ada@example.net", got)
	}

	r := e.post(t, "/v1/email-changes/undo", "", codeBody(undo))
	wantStatus(t, "POST /v1/email-changes/undo", r, http.StatusOK)
	var back me
	if err := json.Unmarshal(r.body, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != ada.User.ID || back.Email != "ada@example.com" {
		t.Errorf("undo answered %+v, want Ada's account at ada@example.com", back)
	}
	wantUnauthenticated(t, "the confirming session after the undo", e.get(t, "/v1/me", ada.Token))

	before := e.snapshot(t)
	r = e.post(t, "/v1/email-changes/undo", "", codeBody(undo))
	wantProblem(t, "a second undo", r, http.StatusBadRequest, httpapi.TypeInvalidCode)
	e.unchanged(t, "a second undo", before)

	// An address that another account took meanwhile is 409; the code of
	// an erased account is 400. Neither changes anything.
	changed := func(token, from, to string) string {
		t.Helper()
		wantStatus(t, "email change", e.post(t, "/v1/me/email-change", token, newEmailBody(to)), http.StatusAccepted)
		code := e.oneMail(t, mail.TopicEmailChange, to, "/confirm-email")
		wantStatus(t, "confirm", e.post(t, "/v1/email-changes", token, codeBody(code)), http.StatusOK)
		return e.oneMail(t, mail.TopicEmailChanged, from, "/undo-email")
	}
	ada = e.signIn(t, "ada@example.com")
	taken := changed(ada.Token, "ada@example.com", "ada@example.org")
	e.signIn(t, "ada@example.com")
	grace := e.signIn(t, "grace@example.com")
	erased := changed(grace.Token, "grace@example.com", "grace@example.net")
	wantStatus(t, "DELETE /v1/me", e.send(t, request{method: http.MethodDelete, path: "/v1/me", token: grace.Token}), http.StatusNoContent)
	before = e.snapshot(t)
	wantProblem(t, "an undo of an address taken since", e.post(t, "/v1/email-changes/undo", "", codeBody(taken)),
		http.StatusConflict, httpapi.TypeEmailTaken)
	wantProblem(t, "an undo of an erased account", e.post(t, "/v1/email-changes/undo", "", codeBody(erased)),
		http.StatusBadRequest, httpapi.TypeInvalidCode)
	e.unchanged(t, "refused undos", before)
	if got := e.me(t, ada.Token).Email; got != "ada@example.org" {
		t.Errorf("after a refused undo the account is at %q, want ada@example.org", got)
	}
}
