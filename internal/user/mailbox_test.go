package user_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// The limit on links counts a mailbox, not a spelling of it: the requests
// of ada+1@..., ada+2@... and ada@... count together, each link goes to
// the address as it was asked for, and each spelling signs in to an
// account of its own.
func TestSignInLinksAreLimitedPerMailbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	codes := map[string]string{}
	for i := range 5 {
		address := fmt.Sprintf("ada+%d@example.com", i)
		codes[address] = b.link(t, address, address)
		b.clock.Advance(time.Minute)
	}
	for _, address := range []string{"ada+5@example.com", "ada@example.com", "  ADA+News@Example.COM"} {
		events := b.events(t)
		var tooMany *user.TooManyRequestsError
		if err := b.svc.RequestSignInLink(ctx, address); !errors.As(err, &tooMany) {
			t.Fatalf("a sixth link to the mailbox, as %q: %v, want a *TooManyRequestsError", address, err)
		}
		if want := 10 * time.Minute; tooMany.RetryAfter != want {
			t.Errorf("as %q: RetryAfter %s, want %s: until the mailbox's first request leaves the window", address, tooMany.RetryAfter, want)
		}
		b.unchanged(t, "a refused link to "+address, events)
	}
	// Another mailbox, however alike, has a limit of its own.
	b.link(t, "ada.lovelace+1@example.com", "ada.lovelace+1@example.com")
	b.link(t, "ada@example.org", "ada@example.org")

	// Each spelling is an address of its own, with its own account.
	one, err := b.svc.SignIn(ctx, codes["ada+1@example.com"])
	if err != nil {
		t.Fatal(err)
	}
	two, err := b.svc.SignIn(ctx, codes["ada+2@example.com"])
	if err != nil {
		t.Fatal(err)
	}
	if one.User.Email != "ada+1@example.com" || two.User.Email != "ada+2@example.com" || one.User.ID == two.User.ID {
		t.Errorf("the links of two spellings signed in to %+v and %+v, want an account each", one.User, two.User)
	}
	if _, err := b.svc.SignIn(ctx, codes["ada+1@example.com"]); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("a used code of one spelling: %v, want ErrInvalidCode", err)
	}

	// Once the first request leaves the window, any spelling may ask again.
	b.clock.Set(start.Add(15 * time.Minute))
	b.link(t, "ada+9@example.com", "ada+9@example.com")
}

// The erasure of one spelling's account erases the mailbox's sign-in
// stream, where every spelling's links are: nothing of the erased address
// is left readable, the other spellings' unused links stop working, the
// mailbox keeps its limit, and the other spellings' accounts stay and
// sign in again with a new link.
func TestAnErasureOfOneSpellingForgetsTheMailbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ada := b.signIn(t, "ada@example.com")
	shop := b.signIn(t, "ada+shop@example.com")
	unused := b.link(t, "ada@example.com", "ada@example.com")
	b.link(t, "ada+shop@example.com", "ada+shop@example.com")
	b.clock.Advance(time.Minute)

	if err := b.svc.DeleteAccount(ctx, shop.Token); err != nil {
		t.Fatal(err)
	}
	for _, a := range b.addresses(t, user.TypeSignInLinkRequested, "email") {
		if a != keyring.Erased {
			t.Errorf("a link request of the erased mailbox's stream opens to %q", a)
		}
	}
	if got := b.addresses(t, user.TypeRegistered, "email"); len(got) != 1 || got[0] != "ada@example.com" {
		t.Errorf("registrations open to %v, want the account that stayed alone", got)
	}
	if n := b.count(t, `SELECT count(*) FROM data_keys WHERE subject LIKE 'signin-%'`); n != 0 {
		t.Errorf("%d sign-in streams have keys, want none", n)
	}
	if _, err := b.svc.SignIn(ctx, unused); !errors.Is(err, user.ErrInvalidCode) {
		t.Errorf("another spelling's unused link after the erasure: %v, want ErrInvalidCode", err)
	}
	sameUser(t, "the other spelling's Me", b.me(t, ada.Token), ada.User)

	// Four links counted before the erasure: one more, then the limit.
	b.link(t, "ada@example.com", "ada@example.com")
	if err := b.svc.RequestSignInLink(ctx, "ada+shop@example.com"); !errors.Is(err, user.ErrTooManyRequests) {
		t.Errorf("a sixth link after the erasure: %v, want ErrTooManyRequests", err)
	}
	b.clock.Set(start.Add(15 * time.Minute))
	again, err := b.svc.SignIn(ctx, b.link(t, "ada@example.com", "ada@example.com"))
	if err != nil || again.User.ID != ada.User.ID {
		t.Errorf("the other spelling signs in to %+v, %v; want its account %s", again.User, err, ada.User.ID)
	}
}

// An address with a subaddress had a sign-in stream of its own before
// streams were the mailbox's, and an erasure forgets that one too: an
// erased address is readable nowhere, the day after an upgrade included.
// An address without one keeps the stream it had.
func TestAnErasureForgetsTheStreamOfTheSpelling(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const address = "ada+old@example.com"
	// Streams as they were named then: the keyed hash of the address.
	var secret []byte
	err := b.db.Runner(b.clock.Now).Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		var err error
		secret, err = b.keys.Secret(ctx, tx, "$signin-stream-names")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	named := func(address string) string {
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(address))
		return "signin-" + hex.EncodeToString(mac.Sum(nil)[:16])
	}
	stream := named(address)
	err = b.db.Runner(b.clock.Now).Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		sealed, err := b.keys.SealUntil(ctx, tx, stream, address, tx.Now().Add(time.Hour))
		if err != nil {
			return err
		}
		e, err := eventstore.NewEvent(user.TypeSignInLinkRequested, user.SignInLinkRequested{
			Email: sealed, CodeHash: strings.Repeat("0", 64), ExpiresAt: tx.Now().Add(linkTTL),
		}, eventstore.Metadata{})
		if err != nil {
			return err
		}
		_, err = b.db.Events().Append(ctx, tx, stream, eventstore.NoStream, e)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s := b.signIn(t, address)
	if got := b.addresses(t, user.TypeSignInLinkRequested, "email"); countOf(got, address) != 2 {
		t.Fatalf("link requests open to %v, want the address twice: in its stream of then and its mailbox's", got)
	}
	b.clock.Advance(time.Minute)
	if err := b.svc.DeleteAccount(ctx, s.Token); err != nil {
		t.Fatal(err)
	}
	if got := b.addresses(t, user.TypeSignInLinkRequested, "email"); countOf(got, address) != 0 {
		t.Errorf("after the erasure link requests open to %v", got)
	}
	if n := b.count(t, `SELECT count(*) FROM data_keys WHERE subject = $1`, stream); n != 0 {
		t.Errorf("the spelling's stream of then keeps %d keys", n)
	}
	if n := b.count(t, `SELECT count(*) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name = $1 AND type <> $2`, stream, user.TypeSignInForgotten); n != 0 {
		t.Errorf("the spelling's stream of then keeps %d events besides its marker", n)
	}
	// An address without a subaddress keeps the stream it had, and its
	// erasure adds none.
	bob := b.signIn(t, "bob@example.com")
	if n := b.count(t, `SELECT count(*) FROM events JOIN event_streams AS s ON s.id = events.stream_id WHERE s.name = $1`, named("bob@example.com")); n != 2 {
		t.Errorf("the stream named by Bob's address holds %d events, want his link and its use", n)
	}
	streams := b.count(t, `SELECT count(DISTINCT stream_id) FROM events`)
	if err := b.svc.DeleteAccount(ctx, bob.Token); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(DISTINCT stream_id) FROM events`); n != streams {
		t.Errorf("the erasure of an address without a subaddress went from %d streams to %d", streams, n)
	}
}
