package user_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/publish"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/integration"
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

// pendingLinkCodes returns the codes of the sign-in mails in the outbox,
// in the order they were added, leaving them there.
func (b *bundle) pendingLinkCodes(t *testing.T) []string {
	t.Helper()
	var codes []string
	for _, line := range b.outboxText(t) {
		if strings.HasPrefix(line, mail.TopicLoginLink+" ") {
			var l mail.Link
			if err := json.Unmarshal([]byte(line[strings.Index(line, "{"):]), &l); err != nil {
				t.Fatal(err)
			}
			codes = append(codes, l.Code)
		}
	}
	return codes
}

// noMessageHolds checks that no message of the outbox holds fragment.
func (b *bundle) noMessageHolds(t *testing.T, what, fragment string) {
	t.Helper()
	for _, line := range b.outboxText(t) {
		if strings.Contains(line, fragment) {
			t.Errorf("%s the outbox holds %s", what, line)
		}
	}
}

// DeleteAccount erases an account in one unit of work: its sessions, links
// and codes stop working, its views and keys go, its streams keep only the
// erasure, the mail and events not yet sent that are the person's are
// deleted, and user.deleted is published; another account's mail to the
// same address stays; the address can sign up again as a new account.
func TestDeleteAccountErasesThePerson(t *testing.T) {
	t.Parallel()
	b := setupPolicy(t, user.Policy{}, user.WithIntegrationEvents(publish.Events{
		Source: baseURL, Destinations: []publish.Destination{publish.Broker},
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
	pendingLink := b.pendingLinkCodes(t)[0]

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
	if _, err := b.svc.ConfirmEmailChange(ctx, change, ""); !errors.Is(err, user.ErrInvalidCode) {
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
		"events":             `SELECT count(*) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name = 'user-' || $1::text AND type <> 'user.erased'`,
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
		if strings.Contains(line, "ada@") || strings.Contains(line, ada.User.ID.String()) && !strings.Contains(line, integration.TypeDeleted) {
			t.Errorf("the outbox still holds %s", line)
		}
		topics = append(topics, strings.Fields(line)[0])
	}
	slices.Sort(topics)
	want := []string{
		publish.Topic(publish.Broker, integration.TypeDeleted),
		publish.Topic(publish.Broker, integration.TypeRegistered),
		publish.Topic(publish.Broker, integration.TypeSignedIn),
		mail.TopicEmailChange,
	}
	if !slices.Equal(topics, want) {
		t.Errorf("the outbox holds %v, want %v: Bob's events and mail, and Ada's deletion", topics, want)
	}
	for _, p := range b.published(t) {
		if p.event.Type == integration.TypeDeleted && (p.event.Subject != ada.User.ID.String() || p.data["user_id"] != ada.User.ID.String()) {
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

// erasingViews are PostgreSQL's user views that, the first time a command
// has read a session, let another command commit.
type erasingViews struct {
	postgres.UserViews
	once      sync.Once
	interrupt func()
}

func (v *erasingViews) Session(ctx context.Context, tx uow.Tx, hash string) (user.SessionRow, bool, error) {
	r, ok, err := v.UserViews.Session(ctx, tx, hash)
	v.once.Do(v.interrupt)
	return r, ok, err
}

// A command under way on a session of an account that is erased meanwhile
// is refused as unauthenticated, having changed nothing, whichever it is.
func TestAnErasureWinsOverACommandUnderWay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	for _, c := range []struct {
		name string
		run  func(svc *user.Service, token string) error
	}{
		{"DeleteAccount", func(svc *user.Service, token string) error { return svc.DeleteAccount(ctx, token) }},
		{"SignOut", func(svc *user.Service, token string) error { return svc.SignOut(ctx, token) }},
		{"RequestEmailChange", func(svc *user.Service, token string) error {
			return svc.RequestEmailChange(ctx, token, "new@example.com")
		}},
	} {
		// An address of its own each time: an erasure keeps the address's
		// limit on links.
		address := strings.ToLower(c.name) + "@example.com"
		first := b.signIn(t, address)
		second, err := b.svc.SignIn(ctx, b.link(t, address, address))
		if err != nil {
			t.Fatal(err)
		}
		svc, err := user.NewService(user.Deps{
			Runner: b.db.Runner(b.clock.Now), Events: b.db.Events(), Outbox: b.db.Outbox(), Keys: b.keys,
			Views: &erasingViews{UserViews: postgres.UserViews{}, interrupt: func() {
				if err := b.svc.DeleteAccount(ctx, second.Token); err != nil {
					t.Errorf("the interrupting erasure: %v", err)
				}
			}},
		}, user.Policy{}, baseURL)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.run(svc, first.Token); !errors.Is(err, user.ErrUnauthenticated) {
			t.Errorf("%s while the account was erased: %v, want ErrUnauthenticated", c.name, err)
		}
		if ms := b.mails(t); len(ms) != 0 {
			t.Errorf("%s while the account was erased mailed %+v", c.name, ms)
		}
		if n := b.count(t, `SELECT count(*) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name = 'user-' || $1::text`, first.User.ID); n != 1 {
			t.Errorf("%s while the account was erased: its stream holds %d events, want the erasure alone", c.name, n)
		}
	}
}

// pausingOutbox is PostgreSQL's outbox that, the first time an erasure
// deletes messages, lets another command commit.
type pausingOutbox struct {
	*postgres.Outbox
	once      sync.Once
	interrupt func()
}

func (o *pausingOutbox) Delete(ctx context.Context, tx uow.Tx, ids []uuid.UUID, keys []string) (int64, error) {
	n, err := o.Outbox.Delete(ctx, tx, ids, keys)
	o.once.Do(o.interrupt)
	return n, err
}

// A link asked for while the address's account is being erased does not
// outlive the erasure half-way: the erasure is tried again after it, and
// takes the link with the rest, in the views, in the outbox and in a
// rebuild alike.
func TestALinkAskedForDuringAnErasureGoesWithIt(t *testing.T) {
	t.Parallel()
	// With integration events the erasure has messages to delete, and
	// sends the views' deletions before the interruption.
	events := user.WithIntegrationEvents(publish.Events{Source: baseURL, Destinations: []publish.Destination{publish.Broker}})
	b := setupPolicy(t, user.Policy{}, events)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	var code string
	svc, err := user.NewService(user.Deps{
		Runner: b.db.Runner(b.clock.Now), Events: b.db.Events(), Views: postgres.UserViews{}, Keys: b.keys,
		Outbox: &pausingOutbox{Outbox: b.db.Outbox().(*postgres.Outbox), interrupt: func() {
			if err := b.svc.RequestSignInLink(ctx, "ada@example.com"); err != nil {
				t.Errorf("the interrupting request: %v", err)
			}
			code = b.oneMail(t, mail.TopicLoginLink, "ada@example.com", "/sign-in").Link.Code
		}},
	}, user.Policy{}, baseURL, events)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteAccount(ctx, ada.Token); err != nil {
		t.Fatal(err)
	}
	for _, when := range []string{"after the erasure", "after a rebuild"} {
		if _, err := b.svc.SignInAddress(ctx, code); !errors.Is(err, user.ErrInvalidCode) {
			t.Errorf("the link asked for during the erasure, %s: %v, want ErrInvalidCode", when, err)
		}
		if _, err := projections.Rebuild(ctx, b.db.Runner(b.clock.Now), b.db.Events(), user.ViewsProjection{Views: postgres.UserViews{}, Keys: b.keys}); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM data_keys WHERE subject LIKE 'signin-%'`); n != 0 {
		t.Errorf("%d keys of sign-in streams are left", n)
	}
	for _, line := range b.outboxText(t) {
		if !strings.HasPrefix(line, publish.Topic(publish.Broker, integration.TypeDeleted)) {
			t.Errorf("the outbox holds %s", line)
		}
	}
}

// The mail that tells the owner of an address that someone asked to move
// to it is the owner's: it goes with their erasure.
func TestAnErasureTakesTheNewsOfATakenAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	bob := b.signIn(t, "bob@example.com")
	if err := b.svc.RequestEmailChange(ctx, bob.Token, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.DeleteAccount(ctx, ada.Token); err != nil {
		t.Fatal(err)
	}
	b.noMessageHolds(t, "after Ada's erasure", "ada@")
}

// An erasure keeps the limit of the address's links: the requests it drops
// from the sign-in stream still count, so erasing an account neither gives
// a mailbox more links nor tells an observer, by a fresh limit, that the
// address had an account.
func TestAnErasureKeepsTheAddressLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	for range 4 {
		b.link(t, "ada@example.com", "ada@example.com")
	}
	var before *user.TooManyRequestsError
	if err := b.svc.RequestSignInLink(ctx, "ada@example.com"); !errors.As(err, &before) {
		t.Fatalf("a sixth link: %v, want TooManyRequestsError", err)
	}
	b.clock.Advance(time.Minute)
	if err := b.svc.DeleteAccount(ctx, ada.Token); err != nil {
		t.Fatal(err)
	}
	var after *user.TooManyRequestsError
	if err := b.svc.RequestSignInLink(ctx, "ada@example.com"); !errors.As(err, &after) {
		t.Fatalf("a link after the erasure: %v, want TooManyRequestsError", err)
	}
	if want := before.RetryAfter - time.Minute; after.RetryAfter != want {
		t.Errorf("after the erasure the address waits %s, want %s, as it would have", after.RetryAfter, want)
	}
	b.clock.Advance(after.RetryAfter)
	b.link(t, "ada@example.com", "ada@example.com")
}

// Every mail to the erased address goes with the erasure, even one another
// account asked for before the address was the erased account's.
func TestAnErasureTakesEveryMailToTheAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	mallory := b.signIn(t, "mallory@example.com")
	if err := b.svc.RequestEmailChange(ctx, mallory.Token, "pat@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.RequestSignInLink(ctx, "pat@example.com"); err != nil {
		t.Fatal(err)
	}
	pat, err := b.svc.SignIn(ctx, b.pendingLinkCodes(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := b.svc.DeleteAccount(ctx, pat.Token); err != nil {
		t.Fatal(err)
	}
	b.noMessageHolds(t, "after Pat's erasure", "pat@")
}

// invite adds an invitation into an organization to the outbox, as the
// organizations domain does.
func (b *bundle) invite(t *testing.T, to, code string) {
	t.Helper()
	err := b.db.Runner(b.clock.Now).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		m, err := outbox.NewMessage(mail.TopicOrgInvitation, mail.Link{
			To: to, URL: baseURL + "/invitations?code=" + code, Code: code,
			ExpiresAt: tx.Now().Add(7 * 24 * time.Hour), Organization: "Acme",
		}, tx.Now())
		if err != nil {
			return err
		}
		return b.db.Outbox().Add(ctx, tx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An invitation into an organization mailed to the erased address goes
// with the erasure, as every mail to it does; one to another address
// stays.
func TestAnErasureTakesTheInvitationsToTheAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pat := b.signIn(t, "pat@example.com")
	b.invite(t, "pat@example.com", "patpatpatpatpatpatpatpatpatpat22")
	b.invite(t, "quinn@example.com", "quinnquinnquinnquinnquinnquinn22")
	if err := b.svc.DeleteAccount(t.Context(), pat.Token); err != nil {
		t.Fatal(err)
	}
	b.noMessageHolds(t, "after Pat's erasure", "pat@")
	if ms := b.mails(t); len(ms) != 1 || ms[0].Topic != mail.TopicOrgInvitation || ms[0].Link.To != "quinn@example.com" {
		t.Errorf("after Pat's erasure the outbox holds %+v, want Quinn's invitation", ms)
	}
}

// The sweep of buried mail, which removes the fields of mail.SecretFields
// from every topic's, leaves an invitation nothing that accepts it.
func TestTheSweepRemovesTheCodeOfABuriedInvitation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const code = "quinnquinnquinnquinnquinnquinn22"
	b.invite(t, "quinn@example.com", code)
	if _, err := b.db.Pool().Exec(ctx, `UPDATE outbox_messages SET buried_at = now()`); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(linkTTL + time.Second)
	for _, topic := range mail.Topics { // as cmd/app's sweep
		if _, err := b.db.Outbox().RedactBuried(ctx, topic, mail.SecretFields, b.clock.Now().Add(-linkTTL)); err != nil {
			t.Fatal(err)
		}
	}
	b.noMessageHolds(t, "after the sweep", code)
}

// The address another account asked to move to is not that account's to
// keep: a taken one is not recorded, one whose confirmation is still in
// the outbox goes with the erasure of the address's account, and every
// one goes once its change can no longer be confirmed.
func TestTheAddressesOthersAskedForAreErased(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	mallory := b.signIn(t, "mallory@example.com")
	pat := b.signIn(t, "pat@example.com")
	for _, to := range []string{"pat@example.com", "quinn@example.com", "rose@example.com"} {
		if err := b.svc.RequestEmailChange(ctx, mallory.Token, to); err != nil {
			t.Fatal(err)
		}
	}
	// Rose's confirmation is delivered; Quinn's waits in the outbox.
	for _, line := range b.outboxText(t) {
		if strings.Contains(line, `"to":"rose@example.com"`) {
			if n, err := b.db.Pool().Exec(ctx, `DELETE FROM outbox_messages WHERE payload->>'to' = 'rose@example.com'`); err != nil || n.RowsAffected() != 1 {
				t.Fatalf("delivering Rose's mail: %v", err)
			}
		}
	}
	if got := b.addresses(t, user.TypeEmailChangeRequested, "new_email"); !slices.Equal(got, []string{"", "quinn@example.com", "rose@example.com"}) {
		t.Fatalf("Mallory's changes open to %v, want no address for the taken one", got)
	}
	for _, who := range []string{"quinn@example.com", "rose@example.com"} {
		if err := b.svc.RequestSignInLink(ctx, who); err != nil {
			t.Fatal(err)
		}
	}
	for _, code := range b.pendingLinkCodes(t) {
		s, err := b.svc.SignIn(ctx, code)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.svc.DeleteAccount(ctx, s.Token); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.addresses(t, user.TypeEmailChangeRequested, "new_email"); !slices.Equal(got, []string{"", keyring.Erased, "rose@example.com"}) {
		t.Errorf("after Quinn's and Rose's erasures Mallory's changes open to %v, want Quinn's erased with its pending mail", got)
	}
	b.clock.Advance(15*time.Minute + 5*time.Minute + time.Second)
	if n, err := b.svc.ForgetSettledChanges(ctx); err != nil || n == 0 {
		t.Fatalf("ForgetSettledChanges = %d, %v", n, err)
	}
	if got := b.addresses(t, user.TypeEmailChangeRequested, "new_email"); !slices.Equal(got, []string{"", keyring.Erased, keyring.Erased}) {
		t.Errorf("once the changes are past Mallory's changes open to %v, want all erased", got)
	}
	sameUser(t, "Pat's Me", b.me(t, pat.Token), pat.User)
}

// The notice of a change, mailed to the address the account left, goes
// with the erasure of the account while it waits in the outbox, though
// the address is no longer the account's; so does its undo code.
func TestAnErasureTakesTheNoticeOfAChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	change := b.changeCode(t, ada.Token, "ada.moved@example.com")
	if _, err := b.svc.ConfirmEmailChange(ctx, change, ada.Token); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM outbox_messages WHERE topic = $1`, mail.TopicEmailChanged); n != 1 {
		t.Fatalf("the outbox holds %d notices, want 1", n)
	}
	if err := b.svc.DeleteAccount(ctx, ada.Token); err != nil {
		t.Fatal(err)
	}
	b.noMessageHolds(t, "after the erasure", "ada@")
	b.noMessageHolds(t, "after the erasure", "@e***.com")
	if n := b.count(t, `SELECT count(*) FROM email_undo_codes WHERE user_id = $1`, ada.User.ID); n != 0 {
		t.Errorf("email_undo_codes holds %d codes of the erased account", n)
	}
}
