package user

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// TypeErased is the last event of an account's stream ("user-ID"): the
// account was deleted at its owner's request.
const TypeErased = "user.erased"

// Erased records the deletion of an account ([Service.DeleteAccount]). It
// holds no personal data; the unit of work that appended it forgot the
// keys that the account's addresses were sealed under.
type Erased struct {
	UserID uuid.UUID `json:"user_id"`
}

// TypeSignInForgotten is the event that ends what a sign-in stream
// ("signin-HASH") held before it: the stream's keys were forgotten, so the
// addresses of its earlier events are erased, and those events may have
// been dropped ([eventstore.Store.Truncate]). An erasure appends it, and
// so does the sweep of an address that asked for no link lately.
const TypeSignInForgotten = "signin.forgotten"

// SignInForgotten is the data of [TypeSignInForgotten]. It holds no
// address and no account, so that the event a truncated stream keeps says
// nothing of whose it was; only the times of the stream's link requests
// that could still count against its limit, so that forgetting an address,
// or erasing its account, does not give it a fresh limit (and so tell an
// observer that it had an account).
type SignInForgotten struct {
	Requests []time.Time `json:"requests,omitempty"`
}

// DeleteAccount erases the account of the session's user at their request
// (GDPR art. 17), in one unit of work, so that nothing of it is left half
// erased:
//
//   - It appends [Erased] to the account's stream, which ends every
//     session and takes the account out of the views: its row, sessions
//     and codes, and the sign-in codes of its address; the activity, which
//     follows the log, deletes its rows when it gets there.
//   - It forgets the keys of the account's stream, of its address's
//     sign-in stream, of its changes of address and of the changes that
//     other accounts asked to its address and whose confirmation is still
//     in the outbox, which erases every address those hold, and
//     drops all but the last event of both ([eventstore.Store.Truncate]):
//     [Erased], and [SignInForgotten], which it appends to the sign-in
//     stream, so that a link asked for meanwhile is asked for again after
//     the erasure rather than sealed under a key it forgets. The sign-in
//     stream is the mailbox's, so this erases every spelling of the
//     mailbox that asked for links lately, and the unused links of the
//     others stop working (personal.go); an address with a subaddress
//     has its stream from before streams were the mailbox's forgotten
//     too, if it has one.
//   - It deletes the messages not yet delivered that are the person's:
//     every mail to the address (a sign-in link, a confirmation someone
//     asked for, the news that someone asked to move to it, an
//     invitation into an organization), every confirmation the account
//     asked for to another address, and the integration events about
//     it. A message that a relay holds at that moment may still go out,
//     once.
//   - With integration events, it publishes that the account was
//     deleted (integration.TypeDeleted).
//   - It runs the hooks of [WithErasure], before it appends [Erased].
//
// It holds the account's stream first, then its address's sign-in stream
// ([eventstore.Store.Lock]), before it reads what it erases: a unit of
// work that holds the account's stream ([Service.Authenticate]) ends
// first, and the erasure sees what it wrote.
//
// The account's former addresses are no longer its own: their sign-in
// streams, their links and mail are whoever's holds them now, and the
// sweep forgets them as any address's ([Service.ForgetIdleAddresses]).
//
// The address can then sign up again, as a new account. It returns
// [ErrUnauthenticated].
func (s *Service) DeleteAccount(ctx context.Context, token string) error {
	secret, err := s.signInSecret(ctx)
	if err != nil {
		return err
	}
	return s.commands.Do(ctx, "user.DeleteAccount", func(ctx context.Context, tx uow.Tx) error {
		// Hold the account's stream before reading or writing anything
		// of the account, as the commands of other domains do
		// (Authenticate): one under way finishes first, and the erasure
		// and its hooks then see what it wrote.
		acct, _, err := s.authenticateHeld(ctx, tx, token)
		if err != nil {
			return err
		}
		stream, signIn := userStream(acct.id), signInStream(secret, acct.email)
		// Then hold the address's stream, as a sign-in, the sweep and a
		// change of address to it do, so that they take turns instead of
		// deadlocking. Always the account's stream first, then the
		// address's: those hold an address's stream and never wait for
		// an account's, and the commands that hold an account's stream
		// hold no address's, so no two units of work each hold a stream
		// that the other waits for.
		if err := s.Events.Lock(ctx, tx, signIn); err != nil {
			return err
		}
		links, err := s.loadSignInLinks(ctx, tx, signIn)
		if err != nil {
			return err
		}
		// The address's own stream from before streams were the
		// mailbox's, which only the sweep holds now, one at a time.
		spelling := spellingStream(secret, acct.email)
		var spelt signInLinks
		if spelling != "" {
			if err := s.Events.Lock(ctx, tx, spelling); err != nil {
				return err
			}
			if spelt, err = s.loadSignInLinks(ctx, tx, spelling); err != nil {
				return err
			}
		}
		ids, changes, err := s.personalMail(ctx, tx, acct)
		if err != nil {
			return err
		}
		u := User{ID: acct.id, Email: acct.email, CreatedAt: acct.createdAt}
		for _, hook := range s.erasureHooks {
			if err := hook(ctx, tx, u); err != nil {
				return fmt.Errorf("user: erasure hook: %w", err)
			}
		}
		erased := Erased{UserID: acct.id}
		e, err := event(ctx, erased)
		if err != nil {
			return err
		}
		appended, err := s.appendAndApply(ctx, tx, stream, eventstore.Exactly(acct.version), e)
		if err != nil {
			return err
		}
		if _, err := s.Outbox.Delete(ctx, tx, ids, s.integration.Keys(acct.id.String())); err != nil {
			return err
		}
		if err := s.forget(ctx, tx, stream); err != nil {
			return err
		}
		for _, subject := range changes {
			if _, err := s.Keys.Forget(ctx, tx, subject); err != nil {
				return err
			}
		}
		if err := s.forgetSignIn(ctx, tx, signIn, links); err != nil {
			return err
		}
		if spelt.version > 0 {
			if err := s.forgetSignIn(ctx, tx, spelling, spelt); err != nil {
				return err
			}
		}
		return s.publish(ctx, tx, deleted(erased, appended[0].Version))
	})
}

// WithErasure adds hook to what [Service.DeleteAccount] does, for another
// domain that keeps something of accounts: it runs in the erasure's unit
// of work, with the account to erase, once the erasure holds the
// account's stream and its address's and has read what it deletes, and
// before it appends [Erased]. So what hook writes commits with the
// erasure, or rolls back with it. A unit of work that holds the
// account's stream ([Service.Authenticate]) ends before hook runs, and
// hook sees what it wrote.
//
// A hook's error fails the erasure, which then changes nothing; one that
// wraps [eventstore.ErrConcurrency] runs the erasure again, as a race it
// lost. Hooks run in the order given. A hook must not hold another
// account's stream, lest two erasures wait on each other; a message it
// adds to the outbox stays, but for one keyed as the account's
// integration events (the keys that publish.Events gives its ID), which
// goes with them.
func WithErasure(hook func(ctx context.Context, tx uow.Tx, u User) error) Option {
	return func(s *Service) { s.erasureHooks = append(s.erasureHooks, hook) }
}

// forget forgets the keys of stream, which erases the addresses it holds,
// and drops all but its last event.
func (s *Service) forget(ctx context.Context, tx uow.Tx, stream string) error {
	if _, err := s.Keys.Forget(ctx, tx, stream); err != nil {
		return err
	}
	_, err := s.Events.Truncate(ctx, tx, stream, math.MaxInt64)
	return err
}

// forgetSignIn appends [SignInForgotten], with the times of the recent
// requests of links, to a sign-in stream at the version links were read
// at, so that a link asked for since fails this unit of work, and it is
// tried again; then it forgets the stream's keys and drops its events
// before the marker.
func (s *Service) forgetSignIn(ctx context.Context, tx uow.Tx, stream string, links signInLinks) error {
	// Only the requests that can still count: those within LinkWindow.
	var recent []time.Time
	for _, at := range links.requests {
		if at.After(tx.Now().Add(-s.policy.LinkWindow)) {
			recent = append(recent, at)
		}
	}
	e, err := event(ctx, SignInForgotten{Requests: recent})
	if err != nil {
		return err
	}
	if _, err := s.Events.Append(ctx, tx, stream, eventstore.Exactly(links.version), e); err != nil {
		return err
	}
	return s.forget(ctx, tx, stream)
}

// personalMail returns the IDs of the mails in the outbox that are the
// account's, and the subjects of the changes of address whose asked-for
// address is the account's to erase. The mails: every mail to its address,
// which is the account's alone (whoever asked for it, even before the
// address was the account's), every confirmation it asked for to
// another address, and every notice of its changes to an address it left
// ([mail.Link.Account]), in any state. The changes: the
// account's own, and those of other accounts whose confirmation to its
// address is still in the outbox with its code. It reads the account's
// whole stream, which only an erasure does.
func (s *Service) personalMail(ctx context.Context, tx uow.Tx, acct account) ([]uuid.UUID, []string, error) {
	var ids []uuid.UUID
	var changes []string
	for _, topic := range mail.Topics {
		msgs, err := s.Outbox.Addressed(ctx, tx, topic, "to", acct.email)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range msgs {
			ids = append(ids, m.ID)
			if topic != mail.TopicEmailChange {
				continue
			}
			var link mail.Link
			if err := json.Unmarshal(m.Payload, &link); err != nil {
				return nil, nil, fmt.Errorf("user: mail %s: %w", m.ID, err)
			}
			if link.Code != "" {
				changes = append(changes, changeSubject(hashSecret(link.Code)))
			}
		}
	}
	// Its confirmations to other addresses, and the notices of its
	// changes to the addresses it left.
	for _, topic := range []string{mail.TopicEmailChange, mail.TopicEmailChanged} {
		asked, err := s.Outbox.Addressed(ctx, tx, topic, "account", acct.id.String())
		if err != nil {
			return nil, nil, err
		}
		for _, m := range asked {
			ids = append(ids, m.ID)
		}
	}
	events, err := s.Events.Load(ctx, tx, userStream(acct.id), 0)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range events {
		if e.Type == TypeEmailChangeRequested {
			d, err := Decode[EmailChangeRequested](e)
			if err != nil {
				return nil, nil, err
			}
			changes = append(changes, changeSubject(d.CodeHash))
		}
	}
	return ids, changes, nil
}
