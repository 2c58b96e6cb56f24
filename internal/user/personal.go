package user

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// The addresses in this domain's events are personal data, and the log
// keeps its events for good; so each address is sealed with the keyring
// ([keyring.Keyring]) under the key of the event's stream, and erased by
// deleting that key (crypto-shredding):
//
//   - "user-ID": the account's addresses. Its key goes when the account
//     is deleted.
//   - "change-CODEHASH": the address a change of address asked for, which
//     may be another person's. Its key is kept while the change can be
//     confirmed, and forgotten by the sweep after, or at once by the
//     erasure of the address's account while the confirmation mail to it
//     is still in the outbox ([Service.DeleteAccount]).
//   - "signin-HASH": the addresses of one mailbox that asked for links.
//     Its keys are kept only while a link can still count against the
//     mailbox's limit or sign in ([keyring.Keyring.SealUntil]); the sweep
//     then forgets them and drops the stream's events before a
//     [SignInForgotten] ([Service.ForgetIdleAddresses]), and so does the
//     erasure of the account of any of those addresses.
//
// The name of a sign-in stream is a keyed hash of the address's mailbox
// (HMAC-SHA256 under a secret of the keyring's, signInNamesSubject), so
// that the log's stream names list no address either. It is the mailbox's
// ([mail.Mailbox]): every spelling of one mailbox (ada@..., ada+news@...)
// asks for links in one stream and counts against one limit, and a
// stream holds, sealed, each spelling that asked. So forgetting the
// stream, at an erasure or by the sweep, erases every spelling in it;
// an erasure also makes the unused links of the mailbox's other
// spellings unknown, and their holder, who is the mailbox's owner, asks
// again. An address without a subaddress names the stream it named
// before streams were the mailbox's; one with a subaddress named a
// stream of its own then ([Service.DeleteAccount] forgets that one too).

// signInNamesSubject is the keyring subject whose secret names the sign-in
// streams ([keyring.Keyring.Secret]).
const signInNamesSubject = "$signin-stream-names"

// signInPrefix begins the name of every sign-in stream.
const signInPrefix = "signin-"

// signInStream returns the name of the sign-in stream of the mailbox that
// email reaches ([mail.Mailbox]).
func signInStream(secret []byte, email string) string {
	return streamOf(secret, mail.Mailbox(email))
}

// spellingStream returns the name of the sign-in stream that email had
// before streams were the mailbox's, when that was another one: that of
// an address with a subaddress. It returns "" for any other address.
func spellingStream(secret []byte, email string) string {
	if mail.Mailbox(email) == email {
		return ""
	}
	return streamOf(secret, email)
}

// streamOf returns signInPrefix and the name of address under secret
// ([keyring.Name]).
func streamOf(secret []byte, address string) string {
	return signInPrefix + keyring.Name(secret, address)
}

// userPrefix begins the name of every account's stream.
const userPrefix = "user-"

// userStream returns the name of the stream of the account id.
func userStream(id uuid.UUID) string { return userPrefix + id.String() }

// UserOf returns the ID of the account whose stream ([userStream]) holds
// e. The stream names the account, so an event of it need not; the folds
// and projections of one that leaves it out take it from here. It
// returns an error for an event of any other stream.
func UserOf(e eventstore.Event) (uuid.UUID, error) {
	rest, ok := strings.CutPrefix(e.Stream, userPrefix)
	if !ok {
		return uuid.Nil, fmt.Errorf("user: %s %s is in stream %q, not an account's", e.Type, e.ID, e.Stream)
	}
	id, err := uuid.Parse(rest)
	if err != nil || id == uuid.Nil || userStream(id) != e.Stream {
		return uuid.Nil, fmt.Errorf("user: %s %s is in stream %q, which names no account", e.Type, e.ID, e.Stream)
	}
	return id, nil
}

// changePrefix begins the keyring subject of every change of address.
const changePrefix = "change-"

// changeSubject returns the keyring subject that the address asked for by
// the change of address with the code hash is sealed for.
func changeSubject(codeHash string) string { return changePrefix + codeHash }

// signInSecret returns the secret that names sign-in streams, read, or
// made the first time ever, in a unit of work of its own before the
// command that needs it begins its own ([keyring.Names]).
func (s *Service) signInSecret(ctx context.Context) ([]byte, error) {
	secret, err := s.names.Secret(ctx)
	if err != nil {
		return nil, fmt.Errorf("user: %w", err)
	}
	return secret, nil
}

// seal returns address sealed for stream, whose key is kept until the
// account is erased.
func (s *Service) seal(ctx context.Context, tx uow.Tx, stream, address string) (string, error) {
	return s.sealUntil(ctx, tx, stream, address, time.Time{})
}

// sealUntil returns address sealed for stream, whose key is kept until
// expires ([keyring.Keyring.SealUntil]).
func (s *Service) sealUntil(ctx context.Context, tx uow.Tx, stream, address string, expires time.Time) (string, error) {
	return s.Keys.SealUntil(ctx, tx, stream, address, expires)
}

// Address returns the address that value, a field of e, holds: opened
// with the key of the subject it was sealed for (e's stream, or, for the
// address an [EmailChangeRequested] asked for, its change's), and as it is
// when it is not sealed, as in events written before addresses were
// sealed. A value whose key is gone gives [keyring.Erased] and false. The
// views and projections that show addresses read them through it.
func Address(ctx context.Context, tx uow.Tx, keys *keyring.Keyring, e eventstore.Event, value string) (string, bool, error) {
	subject := e.Stream
	if e.Type == TypeEmailChangeRequested {
		d, err := Decode[EmailChangeRequested](e)
		if err != nil {
			return "", false, err
		}
		subject = changeSubject(d.CodeHash)
	}
	return openAddress(ctx, tx, keys, subject, value)
}

// openAddress is [Address] for a value sealed for subject.
func openAddress(ctx context.Context, tx uow.Tx, keys *keyring.Keyring, subject, value string) (string, bool, error) {
	if !keyring.Sealed(value) {
		return value, true, nil
	}
	if keys == nil {
		return "", false, fmt.Errorf("user: a sealed address of %s, and no keyring to open it", subject)
	}
	return keys.Open(ctx, tx, subject, value)
}
