package user_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/user"
)

// logText returns every stream name, data and metadata of the log, as
// text to search.
func (b *bundle) logText(t *testing.T) string {
	t.Helper()
	var sb strings.Builder
	rows, err := b.db.Pool().Query(t.Context(), `SELECT s.name, data::text, correlation_id || ' ' || causation_id || ' ' || metadata::text FROM events JOIN event_streams AS s ON s.id = events.stream_id ORDER BY position`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var stream, data, metadata string
		if err := rows.Scan(&stream, &data, &metadata); err != nil {
			t.Fatal(err)
		}
		sb.WriteString(stream + " " + data + " " + metadata + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// The log holds no address in plain text, in stream names, data or
// metadata, though each command's answer, the views and the events opened
// with the keyring all have them.
func TestTheLogHoldsNoAddressInPlainText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	code := b.changeCode(t, ada.Token, "ada.lovelace@example.com")
	b.confirm(t, code, ada.Token)
	b.signIn(t, "ada.lovelace@example.com")
	if err := b.svc.RequestSignInLink(ctx, "link.only@example.com"); err != nil {
		t.Fatal(err)
	}
	b.mails(t)
	// "ada@" and "ada.", not "ada", which a hash in hex may hold.
	for _, secret := range []string{"ada@", "ada.", "lovelace", "link.only", "example.com"} {
		if text := b.logText(t); strings.Contains(text, secret) {
			t.Errorf("the log holds %q:\n%s", secret, text)
		}
	}
	if me := b.me(t, ada.Token); me.Email != "ada.lovelace@example.com" {
		t.Errorf("Me = %s, want ada.lovelace@example.com", me.Email)
	}
	want := map[string][]string{
		user.TypeRegistered:           {"ada@example.com"},
		user.TypeEmailChangeRequested: {"ada.lovelace@example.com"},
		user.TypeSignInLinkRequested:  {"ada@example.com", "ada.lovelace@example.com", "link.only@example.com"},
	}
	fields := map[string]string{user.TypeRegistered: "email", user.TypeEmailChangeRequested: "new_email", user.TypeSignInLinkRequested: "email"}
	for typ, addrs := range want {
		if got := b.addresses(t, typ, fields[typ]); strings.Join(got, " ") != strings.Join(addrs, " ") {
			t.Errorf("%s opens to %v, want %v", typ, got, addrs)
		}
	}
	if got := b.addresses(t, user.TypeEmailChanged, "old_email"); len(got) != 1 || got[0] != "ada@example.com" {
		t.Errorf("EmailChanged's old address opens to %v", got)
	}
	// A sign-in stream is named by a keyed hash: the same address names the
	// same stream, and the name shows nothing of it.
	if n := b.count(t, `SELECT count(DISTINCT s.name) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name LIKE 'signin-%'`); n != 3 {
		t.Errorf("%d sign-in streams, want 3: one per address", n)
	}
}

// An address that asked for a link and never signed in is erased from the
// log once the link no longer matters: its key is forgotten and its
// stream keeps only its last event, whose address reads as erased. The
// address can ask again, and sign in, as if it never had.
func TestIdleAddressesAreForgotten(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	for range 3 {
		if err := b.svc.RequestSignInLink(ctx, "link.only@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	b.mails(t)
	var stream string
	if err := b.db.Pool().QueryRow(ctx, `SELECT DISTINCT s.name FROM events JOIN event_streams AS s ON s.id = events.stream_id`).Scan(&stream); err != nil {
		t.Fatal(err)
	}
	// Within the window and the margin, nothing goes.
	b.clock.Advance(15*time.Minute + 4*time.Minute)
	if n, err := b.svc.ForgetIdleAddresses(ctx); err != nil || n != 0 {
		t.Fatalf("ForgetIdleAddresses within the margin = %d, %v; want 0", n, err)
	}
	b.clock.Advance(2 * time.Minute)
	if n, err := b.svc.Sweep(ctx); err != nil || n != 3 {
		t.Fatalf("Sweep = %d, %v; want the 3 expired codes", n, err)
	}
	if n, err := b.svc.ForgetIdleAddresses(ctx); err != nil || n != 1 {
		t.Fatalf("ForgetIdleAddresses = %d, %v; want 1", n, err)
	}
	if n := b.count(t, `SELECT count(*) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name LIKE 'signin-%' AND type = $1 AND data::text = '{}'`, user.TypeSignInForgotten); n != 1 {
		t.Errorf("the sign-in stream keeps %d bare %s events, want one", n, user.TypeSignInForgotten)
	}
	if n := b.count(t, `SELECT count(*) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name LIKE 'signin-%'`); n != 1 {
		t.Errorf("the sign-in stream keeps %d events, want the marker alone", n)
	}
	if n := b.count(t, `SELECT count(*) FROM data_keys`); n != 1 {
		t.Errorf("%d data keys are left, want the secret of the stream names alone", n)
	}
	if n, err := b.svc.ForgetIdleAddresses(ctx); err != nil || n != 0 {
		t.Errorf("ForgetIdleAddresses again = %d, %v; want 0", n, err)
	}
	// The limit of 5 counts none of the forgotten requests, which are
	// out of the window anyway; the stream goes on from its version.
	for range 5 {
		b.link(t, "link.only@example.com", "link.only@example.com")
	}
	var tooMany *user.TooManyRequestsError
	if err := b.svc.RequestSignInLink(ctx, "link.only@example.com"); !errors.As(err, &tooMany) {
		t.Errorf("a sixth link in the window: %v, want TooManyRequestsError", err)
	}
	code := b.link(t, "other@example.com", "other@example.com")
	if _, err := b.svc.SignIn(ctx, code); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT max(version) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name = $1`, stream); n != 9 {
		t.Errorf("the forgotten address's stream is at version %d, want 9: numbered on from its marker, 4", n)
	}
	if got := b.addresses(t, user.TypeSignInLinkRequested, "email"); strings.Count(strings.Join(got, " "), "link.only@example.com") != 5 {
		t.Errorf("the new requests open to %v, want the address 5 times", got)
	}
}

// UserOf reads the account from the name of its stream, and refuses any
// other stream, and any other spelling of an account's.
func TestUserOf(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0190a3b1-0000-7000-8000-00000000a0a0")
	if got, err := user.UserOf(eventstore.Event{Stream: "user-" + id.String()}); err != nil || got != id {
		t.Errorf("UserOf(user-%s) = %s, %v", id, got, err)
	}
	for _, stream := range []string{
		"", "signin-" + id.String(), "user-", "user-ada", "user-" + strings.ToUpper(id.String()),
		"user-" + uuid.Nil.String(), "user-{" + id.String() + "}", "user-urn:uuid:" + id.String(),
	} {
		if got, err := user.UserOf(eventstore.Event{Stream: stream}); err == nil {
			t.Errorf("UserOf(%q) = %s, want an error", stream, got)
		}
	}
}
