package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/user"
)

// TestErasureLeavesNoAddressInTheDatabase runs the whole app on each
// backend: a person who changed their address and asked for another
// change deletes their account, and an address that only ever asked for a
// link waits out its window. Once the sweeps have run, a dump of every row
// of every table, the events and the keys included, holds neither address
// anywhere in plain text, the API answers as if they had never been, and
// both sign up again as new people. Then the master key is rotated, the
// app restarted with the new key alone, and the account that stayed
// still signs in and confirms the change it asked for before.
func TestErasureLeavesNoAddressInTheDatabase(t *testing.T) {
	t.Parallel()
	for name, database := range e2eDatabases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			erasure(t, database(t))
		})
	}
}

func erasure(t *testing.T, database e2eDatabase) {
	databaseURL := database.Direct
	mx := smtptest.NewServer(t)
	vars := database.mailing(mx, map[string]string{
		"SWEEP_INTERVAL": "0", // The test sweeps, on a clock an hour on.
	})
	app := e2eStart(t, vars)
	mails := &e2eMails{mx: mx}

	ada := app.signIn(t, mails, "ada@example.com")
	app.expect(t, "POST", "/v1/me/email-change", ada.Token, `{"new_email":"ada.lovelace@example.com"}`, http.StatusAccepted, nil)
	app.expect(t, "POST", "/v1/email-changes", ada.Token, e2eJSON(t, map[string]string{"code": mails.nextCode(t, "ada.lovelace@example.com", "/confirm-email")}), http.StatusOK, nil)
	mails.nextCode(t, "ada@example.com", "/undo-email")
	app.expect(t, "POST", "/v1/me/email-change", ada.Token, `{"new_email":"ada.byron@example.com"}`, http.StatusAccepted, nil)
	pending := mails.nextCode(t, "ada.byron@example.com", "/confirm-email")
	app.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"ada.lovelace@example.com"}`, http.StatusAccepted, nil)
	unused := mails.nextCode(t, "ada.lovelace@example.com", "/sign-in")
	app.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"link.only@example.com"}`, http.StatusAccepted, nil)
	mails.nextCode(t, "link.only@example.com", "/sign-in")
	bob := app.signIn(t, mails, "bob@example.com")
	dump := dumpDatabase(t, databaseURL)
	for _, address := range []string{"ada.lovelace@example.com", "bob@example.com"} {
		if !strings.Contains(dump, address) {
			t.Fatalf("the dump holds no %s before the erasure: it cannot tell", address)
		}
	}
	// The activity shows the address a change made, so its rows hold it
	// beside the users view, once the projection has read the change.
	awaitDump(t, databaseURL, "the activity of Ada's change", func(d string) bool {
		return strings.Count(d, "ada.lovelace@example.com") >= 2
	})

	app.expect(t, "DELETE", "/v1/me", ada.Token, "", http.StatusNoContent, nil)
	app.expect(t, "GET", "/v1/me", ada.Token, "", http.StatusUnauthorized, nil)
	awaitDump(t, databaseURL, "the activity to drop Ada's", func(d string) bool { return !strings.Contains(d, "ada.") })

	// The sweeps, an hour on: the link-only address's window has passed.
	sweepLater(t, vars, time.Hour)
	dump = dumpDatabase(t, databaseURL)
	// The account's ID stays in its erasure, which tells nothing of whose
	// it was.
	for _, gone := range []string{"ada@", "ada.lovelace@", "ada.byron@", "link.only@"} {
		if i := strings.Index(dump, gone); i >= 0 {
			t.Errorf("the dump still holds %q: ...%s...", gone, dump[max(i-200, 0):min(i+200, len(dump))])
		}
	}
	if !strings.Contains(dump, "bob@example.com") {
		t.Error("the dump lost Bob's address, who stayed")
	}
	// The API answers as if Ada had never been, and both addresses sign up
	// anew.
	app.expect(t, "POST", "/v1/sessions", "", e2eJSON(t, map[string]string{"code": unused}), http.StatusUnauthorized, nil)
	app.expect(t, "POST", "/v1/email-changes", "", e2eJSON(t, map[string]string{"code": pending}), http.StatusBadRequest, nil)
	for _, email := range []string{"ada.lovelace@example.com", "link.only@example.com"} {
		if again := app.signIn(t, mails, email); again.User.ID == ada.User.ID || again.User.ID == bob.User.ID {
			t.Errorf("%s signed in to an account that was there before", email)
		}
	}
	// Bob asks for a change, to confirm it after the rotation.
	app.expect(t, "POST", "/v1/me/email-change", bob.Token, `{"new_email":"bob.new@example.com"}`, http.StatusAccepted, nil)
	bobChange := mails.nextCode(t, "bob.new@example.com", "/confirm-email")
	app.stop(t)

	// Rotate: a new master key first, the old one to unwrap; then serve
	// with the new key alone.
	rotated := "next:" + strings.Repeat("B", 43)
	vars["DATA_KEY"] = rotated + "," + testDataKey
	out, err := runApp(t, t.Context(), vars, "keys", "rotate")
	if err != nil || !strings.Contains(out, "with master key next") {
		t.Fatalf("keys rotate: %q, %v", out, err)
	}
	vars["DATA_KEY"] = rotated
	app = e2eStart(t, vars)
	app.expect(t, "GET", "/v1/me", bob.Token, "", http.StatusOK, nil)
	var moved struct {
		Email string `json:"email"`
	}
	app.expect(t, "POST", "/v1/email-changes", bob.Token, e2eJSON(t, map[string]string{"code": bobChange}), http.StatusOK, &moved)
	if moved.Email != "bob.new@example.com" {
		t.Errorf("Bob's change after the rotation moved him to %q", moved.Email)
	}
	mails.nextCode(t, "bob@example.com", "/undo-email")
	if again := app.signIn(t, mails, "bob.new@example.com"); again.User.ID != bob.User.ID {
		t.Errorf("Bob signs in to %s after the rotation, want his account %s", again.User.ID, bob.User.ID)
	}
	app.stop(t)
}

// sweepLater runs the app's sweeps of the user domain on the database of
// vars, on a clock d ahead of now.
func sweepLater(t *testing.T, vars map[string]string, d time.Duration) {
	t.Helper()
	cfg, err := config.Load(getenv(vars))
	if err != nil {
		t.Fatal(err)
	}
	e := env{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	db, err := e.openDB(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys, err := e.keyring(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	later := testclock.New(time.Now().Add(d))
	users, err := user.NewService(user.Deps{
		Runner: db.Runner(later.Now), Events: db.Events(), Outbox: db.Outbox(), Views: db.Views(), Keys: keys,
	}, user.Policy(cfg.Policy), cfg.BaseURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := users.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := users.ForgetIdleAddresses(t.Context()); err != nil || n == 0 {
		t.Fatalf("ForgetIdleAddresses = %d, %v; want the addresses that asked for links", n, err)
	}
}
