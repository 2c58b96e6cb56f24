package keyring

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eventsourced/accounts/internal/uow"
)

// Store keeps the wrapped data keys; each backend has one, and
// keyringtest is their conformance suite.
type Store interface {
	// Key returns the wrapped key id of subject, and false when the
	// subject has none of that ID.
	Key(ctx context.Context, tx uow.Tx, subject, id string) (WrappedKey, bool, error)
	// AddKey stores a new key that expires at expires (the zero time:
	// never). It may be sent with the
	// unit of work's next statement rather than at once; an error of its
	// is then returned there, or by the commit.
	AddKey(ctx context.Context, tx uow.Tx, k WrappedKey, expires time.Time) error
	// KeepKey stores k unless its subject has a key of k's ID, and returns
	// the key of that ID the subject has now, in one statement: units of
	// work that keep a key at once end with one, the first to commit's.
	// The key is kept until deleted.
	KeepKey(ctx context.Context, tx uow.Tx, k WrappedKey) (WrappedKey, error)
	// DeleteKeys deletes every key of subject and reports whether it had
	// any.
	DeleteKeys(ctx context.Context, tx uow.Tx, subject string) (bool, error)
	// ExpiredSubjects returns, in order, up to limit subjects after after
	// whose names begin with prefix and all of whose keys expire at or
	// before now. Its cost grows with the keys of the subjects of prefix,
	// not with all the store holds.
	ExpiredSubjects(ctx context.Context, tx uow.Tx, prefix, after string, now time.Time, limit int) ([]string, error)
	// KeysNotWrappedBy returns up to limit keys that a master key other
	// than master wrapped.
	KeysNotWrappedBy(ctx context.Context, tx uow.Tx, master string, limit int) ([]WrappedKey, error)
	// Rewrap replaces k, wrapped by k.Master, with wrapped by to; it does
	// nothing when the key is no longer k.Master's.
	Rewrap(ctx context.Context, tx uow.Tx, k WrappedKey, to string, wrapped []byte) error
	// KeyWrappedBy returns a key that the master key master wrapped, and
	// false when there is none.
	KeyWrappedBy(ctx context.Context, tx uow.Tx, master string) (WrappedKey, bool, error)

	// Masters returns the records of the master keys that wrap keys, in
	// order of ID.
	Masters(ctx context.Context, tx uow.Tx) ([]MasterCheck, error)
	// PutMaster records m, or replaces the check of the record of its ID.
	PutMaster(ctx context.Context, tx uow.Tx, m MasterCheck) error
	// DeleteMaster deletes the record of the master key master, if any.
	DeleteMaster(ctx context.Context, tx uow.Tx, master string) error
}

// WrappedKey is a key as the store keeps it: the key ID of Subject, wrapped
// by the master key Master.
type WrappedKey struct {
	Subject string
	ID      string
	Master  string
	Wrapped []byte
}

// Keyring seals and opens the personal data of subjects.
type Keyring struct {
	masters Masters
	store   Store
}

// New returns a keyring over store with the master keys of masters.
func New(masters Masters, store Store) (*Keyring, error) {
	if len(masters.keys) == 0 {
		return nil, errors.New("keyring: no master key")
	}
	return &Keyring{masters: masters, store: store}, nil
}

// sealedPrefix begins every sealed value, with the format's version.
const sealedPrefix = "enc:v1:"

// Erased is what [Keyring.Open] returns for a value whose subject's key has
// been deleted.
const Erased = "[erased]"

// Sealed reports whether s is a value that [Keyring.Seal] made.
func Sealed(s string) bool { return strings.HasPrefix(s, sealedPrefix) }

// Seal encrypts plaintext for subject, under a key made as part of tx
// (one per unit of work under [Within]), which is kept until
// [Keyring.Forget] deletes the subject's keys.
func (k *Keyring) Seal(ctx context.Context, tx uow.Tx, subject, plaintext string) (string, error) {
	return k.SealUntil(ctx, tx, subject, plaintext, time.Time{})
}

// SealUntil is [Keyring.Seal] for a subject whose data is needed only for
// a while: the key is kept until expires, and once every key of the
// subject has expired, a sweep may forget them ([Keyring.ExpiredSubjects]). The zero
// time keeps the key until Forget. Within one unit of work ([Within]) the
// first seal for a subject makes the key, and sets its time.
func (k *Keyring) SealUntil(ctx context.Context, tx uow.Tx, subject, plaintext string, expires time.Time) (string, error) {
	aead, id, err := k.sealingKey(ctx, tx, subject, expires)
	if err != nil {
		return "", fmt.Errorf("keyring: seal for %s: %w", subject, err)
	}
	fp, err := hex.DecodeString(id)
	if err != nil || len(fp) != fingerprintSize {
		return "", fmt.Errorf("keyring: seal for %s: key ID %q is no fingerprint", subject, id)
	}
	out := make([]byte, fingerprintSize+aead.NonceSize(), fingerprintSize+aead.NonceSize()+len(plaintext)+aead.Overhead())
	copy(out, fp)
	nonce := out[fingerprintSize:]
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails.
	out = aead.Seal(out, nonce, []byte(plaintext), []byte(subject))
	return sealedPrefix + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts a value that [Keyring.Seal] sealed for subject. When the
// key it was sealed under has been deleted, even if the subject has other
// keys since, it returns [Erased] and false, and no error: the data is
// gone, as it was meant to be; so does a value of another subject's, which
// never was this one's. A value that is not sealed, or changed, is an
// error.
func (k *Keyring) Open(ctx context.Context, tx uow.Tx, subject, sealed string) (string, bool, error) {
	raw, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return "", false, fmt.Errorf("keyring: open for %s: not a sealed value", subject)
	}
	data, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return "", false, fmt.Errorf("keyring: open for %s: %w", subject, err)
	}
	if len(data) < fingerprintSize+nonceSize {
		return "", false, fmt.Errorf("keyring: open for %s: too short", subject)
	}
	aead, err := k.openingKey(ctx, tx, subject, keyID(data[:fingerprintSize]))
	if errors.Is(err, errNoKey) {
		return Erased, false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("keyring: open for %s: %w", subject, err)
	}
	data = data[fingerprintSize:]
	plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(subject))
	if err != nil {
		return "", false, fmt.Errorf("keyring: open for %s: %w", subject, err)
	}
	return string(plain), true, nil
}

// secretID names, within its subject, the key that [Keyring.Secret] derives
// from.
const secretID = "secret"

// Secret returns a secret of 256 bits for subject, made as part of tx the
// first time it is asked for and the same ever after, through rotations:
// it is derived from a key of the subject's, kept until Forget, so that it
// is wrapped and rotated as the data keys are. It is for keyed hashes,
// such as names that must not show what they name.
func (k *Keyring) Secret(ctx context.Context, tx uow.Tx, subject string) ([]byte, error) {
	key, err := k.newKey(subject, secretID)
	if err != nil {
		return nil, fmt.Errorf("keyring: secret of %s: %w", subject, err)
	}
	kept, err := k.store.KeepKey(ctx, tx, key.WrappedKey)
	if err != nil {
		return nil, fmt.Errorf("keyring: secret of %s: %w", subject, err)
	}
	raw, err := k.masters.unwrap(kept)
	if err != nil {
		return nil, fmt.Errorf("keyring: secret of %s: %w", subject, err)
	}
	secret, err := hkdf.Key(sha256.New, raw, nil, "keyring secret of "+subject, keySize)
	if err != nil {
		return nil, fmt.Errorf("keyring: secret of %s: %w", subject, err)
	}
	return secret, nil
}

// CurrentMaster returns the ID of the master key that wraps new keys.
func (k *Keyring) CurrentMaster() string { return k.masters.current().id }

// Forget deletes every key of subject as part of tx, which erases every
// value sealed for it, and reports whether there was one.
func (k *Keyring) Forget(ctx context.Context, tx uow.Tx, subject string) (bool, error) {
	cacheOf(ctx, tx).drop(subject)
	ok, err := k.store.DeleteKeys(ctx, tx, subject)
	if err != nil {
		return false, fmt.Errorf("keyring: forget %s: %w", subject, err)
	}
	return ok, nil
}

// ExpiredSubjects returns, in order, up to limit subjects after after
// whose names begin with prefix and whose every key [Keyring.SealUntil]
// kept until now or earlier: those whose data is no longer needed, for a
// sweep to forget one at a time ([Keyring.Expired], [Keyring.Forget]).
func (k *Keyring) ExpiredSubjects(ctx context.Context, tx uow.Tx, prefix, after string, now time.Time, limit int) ([]string, error) {
	subjects, err := k.store.ExpiredSubjects(ctx, tx, prefix, after, now, limit)
	if err != nil {
		return nil, fmt.Errorf("keyring: expired subjects: %w", err)
	}
	return subjects, nil
}

// ForgetExpired forgets up to limit subjects whose names begin with
// prefix and whose every key expired at now or earlier
// ([Keyring.ExpiredSubjects]), as part of tx, and returns how many it
// forgot. It suits the subjects that no later seal revives, such as an
// invitation's or a change of address's, which are sealed once.
func (k *Keyring) ForgetExpired(ctx context.Context, tx uow.Tx, prefix string, now time.Time, limit int) (int64, error) {
	subjects, err := k.ExpiredSubjects(ctx, tx, prefix, "", now, limit)
	if err != nil {
		return 0, err
	}
	for _, subject := range subjects {
		if _, err := k.Forget(ctx, tx, subject); err != nil {
			return 0, err
		}
	}
	return int64(len(subjects)), nil
}

// Expired reports whether subject has keys and all of them expire at or
// before now, as tx sees them: a sweep asks again, in the unit of work
// that forgets the subject, whether a seal has kept it since.
func (k *Keyring) Expired(ctx context.Context, tx uow.Tx, subject string, now time.Time) (bool, error) {
	// The subject is the least name that begins with itself.
	subjects, err := k.store.ExpiredSubjects(ctx, tx, subject, "", now, 1)
	if err != nil {
		return false, fmt.Errorf("keyring: expired %s: %w", subject, err)
	}
	return len(subjects) == 1 && subjects[0] == subject, nil
}

// Rotate rewraps, as part of tx, up to limit keys that a master key other
// than the current one wrapped, and returns how many it rewrapped; once it
// returns 0, no key needs the old master keys, it has dropped their
// records ([Keyring.Check]), and DATA_KEY may drop them.
func (k *Keyring) Rotate(ctx context.Context, tx uow.Tx, limit int) (int, error) {
	current := k.masters.current()
	keys, err := k.store.KeysNotWrappedBy(ctx, tx, current.id, limit)
	if err != nil {
		return 0, fmt.Errorf("keyring: rotate: %w", err)
	}
	if len(keys) == 0 {
		if err := k.forgetOthers(ctx, tx); err != nil {
			return 0, fmt.Errorf("keyring: rotate: %w", err)
		}
		return 0, nil
	}
	for _, w := range keys {
		key, err := k.masters.unwrap(w)
		if err != nil {
			return 0, fmt.Errorf("keyring: rotate %s: %w", w.Subject, err)
		}
		wrapped, err := current.wrap(w.Subject, w.ID, key)
		if err != nil {
			return 0, fmt.Errorf("keyring: rotate %s: %w", w.Subject, err)
		}
		if err := k.store.Rewrap(ctx, tx, w, current.id, wrapped); err != nil {
			return 0, fmt.Errorf("keyring: rotate %s: %w", w.Subject, err)
		}
	}
	return len(keys), nil
}

// errNoKey says that a subject has no key of an ID.
var errNoKey = errors.New("no key")

// newKey is a fresh key of subject, wrapped by the current master key, and
// the cipher it seals with. An empty id names it by its fingerprint.
type newKey struct {
	WrappedKey
	aead cipher.AEAD
}

func (k *Keyring) newKey(subject, id string) (newKey, error) {
	key := make([]byte, keySize)
	_, _ = rand.Read(key)
	if id == "" {
		id = keyID(fingerprint(key))
	}
	current := k.masters.current()
	wrapped, err := current.wrap(subject, id, key)
	if err != nil {
		return newKey{}, err
	}
	aead, err := newAEAD(key)
	if err != nil {
		return newKey{}, err
	}
	return newKey{WrappedKey: WrappedKey{Subject: subject, ID: id, Master: current.id, Wrapped: wrapped}, aead: aead}, nil
}

// sealingKey returns the cipher of the key that tx seals subject's values
// under, and the key's ID: under [Within], the one made by the first seal
// for subject in tx; otherwise a new one, added to the store
// ([Store.AddKey]).
func (k *Keyring) sealingKey(ctx context.Context, tx uow.Tx, subject string, expires time.Time) (cipher.AEAD, string, error) {
	c := cacheOf(ctx, tx)
	if aead, id, ok := c.sealing(subject); ok {
		return aead, id, nil
	}
	n, err := k.newKey(subject, "")
	if err != nil {
		return nil, "", err
	}
	if err := k.store.AddKey(ctx, tx, n.WrappedKey, expires); err != nil {
		return nil, "", err
	}
	c.putSealing(subject, n.ID, n.aead)
	return n.aead, n.ID, nil
}

// openingKey returns the cipher of the key id of subject, and errNoKey
// when the subject has none of that ID.
func (k *Keyring) openingKey(ctx context.Context, tx uow.Tx, subject, id string) (cipher.AEAD, error) {
	c := cacheOf(ctx, tx)
	if aead, ok := c.get(subject, id); ok {
		return aead, nil
	}
	w, ok, err := k.store.Key(ctx, tx, subject, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errNoKey
	}
	key, err := k.masters.unwrap(w)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	c.put(subject, id, aead)
	return aead, nil
}

// PrefixEnd returns the least string greater than every string that begins
// with prefix, for the stores' range scans: prefix with its last byte
// incremented, shorter where that byte is 0xff; "" when there is none.
func PrefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// keySize is the size of every key: AES-256.
const keySize = 32

// nonceSize is the size of AES-GCM's standard nonce.
const nonceSize = 12

// fingerprintSize is the length of the fingerprint that each sealed value
// begins with, which names the key that sealed it within its subject.
const fingerprintSize = 8

// fingerprint names a data key in the values it seals: the first bytes of
// its SHA-256, which tell nothing of a random 256-bit key.
func fingerprint(key []byte) []byte {
	sum := sha256.Sum256(key)
	return sum[:fingerprintSize]
}

// keyID is the ID in the store of the key with fingerprint f.
func keyID(f []byte) string { return hex.EncodeToString(f) }

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
