package user_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/integration"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// outboxText returns every message of the outbox as "topic key payload"
// lines, in any state.
func (b *bundle) outboxText(t *testing.T) []string {
	t.Helper()
	rows, err := b.db.Pool().Query(t.Context(), `SELECT topic, coalesce(ordering_key, ''), payload::text FROM outbox_messages ORDER BY topic, created_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var topic, key, payload string
		if err := rows.Scan(&topic, &key, &payload); err != nil {
			t.Fatal(err)
		}
		out = append(out, topic+" "+key+" "+payload)
	}
	return out
}

// DeleteAccount erases an account in one unit of work: its sessions, links
// and codes stop working, its views and keys go, its streams keep only the
// erasure, the mail and events not yet sent that are the person's are
// deleted, and user.deleted is published; another account's mail to the
// same address stays; the address can sign up again as a new account.
func TestDeleteAccountErasesThePerson(t *testing.T) {
	t.Parallel()
	b := setupPolicy(t, user.Policy{}, user.WithIntegrationEvents(integration.Events{
		Source: baseURL, Destinations: []integration.Destination{integration.Broker},
	}))
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	other, err := b.svc.SignIn(ctx, b.link(t, "ada@example.com", "ada@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	bob := b.signIn(t, "bob@example.com")
	change := b.changeCode(t, ada.Token, "ada.new@example.com")
	// Left in the outbox: a link to Ada, Ada's and Bob's confirmations to
	// one address, and the integration events of both.
	if err := b.svc.RequestSignInLink(ctx, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.RequestEmailChange(ctx, ada.Token, "ada.newer@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.RequestEmailChange(ctx, bob.Token, "ada.newer@example.com"); err != nil {
		t.Fatal(err)
	}
	pendingLink := ""
	for _, line := range b.outboxText(t) {
		if strings.HasPrefix(line, mail.TopicLoginLink) {
			_, payload, _ := strings.Cut(strings.TrimPrefix(line, mail.TopicLoginLink+" "), " ")
			var l mail.Link
			if err := json.Unmarshal([]byte(payload), &l); err != nil {
				t.Fatal(err)
			}
			pendingLink = l.Code
		}
	}

	if err := b.svc.DeleteAccount(ctx, ada.Token); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.DeleteAccount(ctx, ada.Token); !errors.Is(err, user.ErrUnauthenticated) {
		t.Errorf("DeleteAccount again: %v, want ErrUnauthenticated", err)
	}
	for _, token := range []string{ada.Token, other.Token} {
		if _, err := b.svc.Me(ctx, token); !errors.Is(err, user.ErrUnauthenticated) {
			t.Errorf("Me with a session of the deleted account: %v, want ErrUnauthenticated", err)
		}
	}
	if _, err := b.svc.ConfirmEmailChange(ctx, change); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("confirming the deleted account's change: %v, want ErrInvalidCode", err)
	}
	if _, err := b.svc.SignIn(ctx, pendingLink); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("the deleted address's pending link: %v, want ErrInvalidCode", err)
	}
	sameUser(t, "Bob's Me", b.me(t, bob.Token), bob.User)

	// The views hold nothing of Ada; the keys of her streams are gone,
	// and the streams keep the erasure alone, and the last link of her
	// address, which reads as erased.
	for table, q := range map[string]string{
		"users":              `SELECT count(*) FROM users WHERE id = $1`,
		"sessions":           `SELECT count(*) FROM sessions WHERE user_id = $1`,
		"email_change_codes": `SELECT count(*) FROM email_change_codes WHERE user_id = $1`,
		"data_keys":          `SELECT count(*) FROM data_keys WHERE subject = 'user-' || $1::text`,
		"events":             `SELECT count(*) FROM events WHERE stream = 'user-' || $1::text AND type <> 'user.erased'`,
	} {
		if n := b.count(t, q, ada.User.ID); n != 0 {
			t.Errorf("%s holds %d rows of the deleted account", table, n)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM signin_codes WHERE email = 'ada@example.com'`); n != 0 {
		t.Errorf("signin_codes holds %d codes of the deleted address", n)
	}
	if n := b.count(t, `SELECT count(*) FROM data_keys WHERE subject LIKE 'signin-%'`); n != 1 {
		t.Errorf("%d sign-in streams have keys, want Bob's alone", n)
	}
	for _, a := range b.addresses(t, user.TypeSignInLinkRequested, "email") {
		if strings.Contains(a, "ada") {
			t.Errorf("a link request of the deleted address opens to %q", a)
		}
	}

	// The outbox keeps Bob's mail to the address Ada also asked for, and
	// the integration events: Bob's, and Ada's deletion, with nothing of
	// hers before it.
	var topics []string
	for _, line := range b.outboxText(t) {
		if strings.Contains(line, "ada@") || strings.Contains(line, ada.User.ID.String()) && !strings.Contains(line, user.EventDeleted) {
			t.Errorf("the outbox still holds %s", line)
		}
		topics = append(topics, strings.Fields(line)[0])
	}
	slices.Sort(topics)
	want := []string{
		integration.Topic(integration.Broker, user.EventDeleted),
		integration.Topic(integration.Broker, user.EventRegistered),
		integration.Topic(integration.Broker, user.EventSignedIn),
		mail.TopicEmailChange,
	}
	if !slices.Equal(topics, want) {
		t.Errorf("the outbox holds %v, want %v: Bob's events and mail, and Ada's deletion", topics, want)
	}
	for _, p := range b.published(t) {
		if p.event.Type == user.EventDeleted && (p.event.Subject != ada.User.ID.String() || p.data["user_id"] != ada.User.ID.String()) {
			t.Errorf("user.deleted about %s, want %s", p.event.Subject, ada.User.ID)
		}
	}

	// The address signs up again, as a new person.
	b.mails(t)
	b.clock.Advance(time.Minute)
	again := b.signIn(t, "ada@example.com")
	if again.User.ID == ada.User.ID {
		t.Error("the address signed in to the deleted account")
	}
	// The deleted account's registration went with its stream's events.
	if got := b.addresses(t, user.TypeRegistered, "email"); !slices.Equal(got, []string{"bob@example.com", "ada@example.com"}) {
		t.Errorf("registrations open to %v, want Bob's and the new account's", got)
	}
}
