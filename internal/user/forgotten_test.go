package user_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// forgottenRequests returns the requests of every signin.forgotten.
func (b *bundle) forgottenRequests(t *testing.T) [][]time.Time {
	t.Helper()
	rows, err := b.db.Pool().Query(t.Context(), `SELECT data::text FROM events WHERE type = $1 ORDER BY position`, user.TypeSignInForgotten)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]time.Time
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		var d user.SignInForgotten
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Requests)
	}
	return out
}

// An erasure takes the account's own confirmation mail to another
// address in any state: buried, its code removed, and after the sweep has
// forgotten the change's key.
func TestAnErasureTakesItsBuriedConfirmations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	if err := b.svc.RequestEmailChange(ctx, ada.Token, "ada.other@example.com"); err != nil {
		t.Fatal(err)
	}
	// The mailbox bounces: the relay buries the confirmation.
	if _, err := b.db.Pool().Exec(ctx, `UPDATE outbox_messages SET buried_at = now() WHERE topic = $1`, mail.TopicEmailChange); err != nil {
		t.Fatal(err)
	}
	// The app's sweeps, 20m later: codes of buried mail, then change keys.
	b.clock.Advance(15*time.Minute + 5*time.Minute + time.Second)
	if _, err := b.db.Outbox().RedactBuried(ctx, mail.TopicEmailChange, mail.SecretFields, b.clock.Now().Add(-linkTTL)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.ForgetSettledChanges(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.DeleteAccount(ctx, ada.Token); err != nil {
		t.Fatal(err)
	}
	b.noMessageHolds(t, "after Ada's erasure", "ada.other@") // kept for OUTBOX_BURIED_RETENTION (168h)
}

// signin.forgotten keeps only the requests that can still count against
// the limit, with a LINK_TTL longer than LINK_WINDOW too.
func TestTheMarkerKeepsOnlyRequestsThatCanCount(t *testing.T) {
	t.Parallel()
	b := setupPolicy(t, user.Policy{LinkTTL: time.Hour, LinkWindow: 15 * time.Minute})
	if err := b.svc.RequestSignInLink(t.Context(), "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	ada, err := b.svc.SignIn(t.Context(), b.mails(t)[0].Link.Code)
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(30 * time.Minute)
	if err := b.svc.DeleteAccount(t.Context(), ada.Token); err != nil {
		t.Fatal(err)
	}
	since := b.clock.Now().Add(-15 * time.Minute)
	for _, rs := range b.forgottenRequests(t) {
		for _, r := range rs {
			if !r.After(since) {
				t.Errorf("signin.forgotten keeps a request at %s, %s ago: it cannot count", r, b.clock.Now().Sub(r))
			}
		}
	}
}

// Markers that follow one another within the window carry an earlier
// marker's requests only while they can count: they do not grow.
func TestChainedMarkersDropStaleRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 4 {
		s := b.signIn(t, "ada@example.com")
		b.clock.Advance(14 * time.Minute)
		if err := b.svc.DeleteAccount(t.Context(), s.Token); err != nil {
			t.Fatal(err)
		}
	}
	rs := b.forgottenRequests(t)
	last := rs[len(rs)-1]
	if len(last) != 1 || b.clock.Now().Sub(last[0]) > 15*time.Minute {
		t.Errorf("the last marker keeps %d requests, oldest %s ago; want the one of the last 15m", len(last), b.clock.Now().Sub(last[0]))
	}
}
