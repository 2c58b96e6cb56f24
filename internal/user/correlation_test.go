package user_test

import (
	"testing"

	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// TestEventsNameTheirRequestAndCommand: each event's metadata carries the
// ID of the request that caused it (correlation) and the command that
// appended it (causation), and the outbox's messages of the same unit of
// work name the same request in their origin.
func TestEventsNameTheirRequestAndCommand(t *testing.T) {
	b := setup(t)
	if err := b.svc.RequestSignInLink(requestid.With(t.Context(), "req-link"), "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	var origin string
	if err := b.db.Pool().QueryRow(t.Context(), `SELECT coalesce(origin->>'request_id', '') FROM outbox_messages WHERE topic = $1`, mail.TopicLoginLink).Scan(&origin); err != nil {
		t.Fatal(err)
	}
	if origin != "req-link" {
		t.Errorf("the mail's origin names request %q, want req-link", origin)
	}
	code := b.oneMail(t, mail.TopicLoginLink, "ada@example.com", "/sign-in").Link.Code
	if _, err := b.svc.SignIn(requestid.With(t.Context(), "req-signin"), code); err != nil {
		t.Fatal(err)
	}
	rows, err := b.db.Pool().Query(t.Context(), `SELECT type, correlation_id, causation_id FROM events ORDER BY position`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := map[string][2]string{
		"signin.link_requested": {"req-link", "user.RequestSignInLink"},
		"user.registered":       {"req-signin", "user.SignIn"},
		"signin.link_used":      {"req-signin", "user.SignIn"},
		"user.session_started":  {"req-signin", "user.SignIn"},
	}
	n := 0
	for rows.Next() {
		var typ, correlation, causation string
		if err := rows.Scan(&typ, &correlation, &causation); err != nil {
			t.Fatal(err)
		}
		n++
		if w, ok := want[typ]; !ok || w != [2]string{correlation, causation} {
			t.Errorf("%s: correlation %q, causation %q; want %q", typ, correlation, causation, w)
		}
	}
	if err := rows.Err(); err != nil || n != len(want) {
		t.Errorf("the log holds %d events (%v), want %d", n, err, len(want))
	}
}
