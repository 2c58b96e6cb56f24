// Package keyring encrypts personal data with a key per person, so that
// deleting the key erases the data wherever it was written: in events,
// which stay immutable, and in every copy of them (crypto-shredding).
//
// Each subject (a person, or an address that asked for a link) has a data
// key of 256 random bits, kept in the store wrapped (encrypted) by a master
// key from the environment, DATA_KEY. Data is sealed with AES-256-GCM under
// the subject's key, the subject bound in as associated data, so a value
// cannot be moved to another subject. A master key has an ID: DATA_KEY may
// list several, the first wrapping new keys and the others only unwrapping
// old ones, until [Keyring.Rotate] has rewrapped every key with the first.
package keyring

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/eventsourced/accounts/internal/uow"
)

// Store keeps the wrapped data keys; each backend has one, and
// keyringtest is their conformance suite.
type Store interface {
	// Key returns the wrapped key of subject and the ID of the master key
	// that wrapped it, and false when the subject has none.
	Key(ctx context.Context, tx uow.Tx, subject string) (wrapped []byte, master string, ok bool, err error)
	// AddKey stores the wrapped key of subject unless the subject has one
	// already, and returns the key the subject has now: two units of work
	// that add a key for one subject at once end with one key, the first
	// to commit's.
	AddKey(ctx context.Context, tx uow.Tx, subject, master string, wrapped []byte) ([]byte, string, error)
	// DeleteKey deletes the key of subject and reports whether it had one.
	DeleteKey(ctx context.Context, tx uow.Tx, subject string) (bool, error)
	// KeysNotWrappedBy returns up to limit subjects whose key a master key
	// other than master wrapped, with those keys.
	KeysNotWrappedBy(ctx context.Context, tx uow.Tx, master string, limit int) ([]WrappedKey, error)
	// Rewrap replaces the wrapped key of subject, wrapped by from, with
	// wrapped by to; it does nothing when the key is no longer from's.
	Rewrap(ctx context.Context, tx uow.Tx, subject, from, to string, wrapped []byte) error
}

// WrappedKey is a subject's key as the store keeps it.
type WrappedKey struct {
	Subject string
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

// Seal encrypts plaintext under the key of subject, making the key as part
// of tx when the subject has none yet.
func (k *Keyring) Seal(ctx context.Context, tx uow.Tx, subject, plaintext string) (string, error) {
	key, err := k.key(ctx, tx, subject, true)
	if err != nil {
		return "", fmt.Errorf("keyring: seal for %s: %w", subject, err)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return "", fmt.Errorf("keyring: seal for %s: %w", subject, err)
	}
	out := make([]byte, fingerprintSize+aead.NonceSize(), fingerprintSize+aead.NonceSize()+len(plaintext)+aead.Overhead())
	copy(out, fingerprint(key))
	nonce := out[fingerprintSize:]
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails.
	out = aead.Seal(out, nonce, []byte(plaintext), []byte(subject))
	return sealedPrefix + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts a value that [Keyring.Seal] sealed for subject. When the
// key it was sealed under has been deleted, even if the subject has a new
// key since, it returns [Erased] and false, and no error: the data is
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
	key, err := k.key(ctx, tx, subject, false)
	if errors.Is(err, errNoKey) {
		return Erased, false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("keyring: open for %s: %w", subject, err)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return "", false, fmt.Errorf("keyring: open for %s: %w", subject, err)
	}
	if len(data) < fingerprintSize+aead.NonceSize() {
		return "", false, fmt.Errorf("keyring: open for %s: too short", subject)
	}
	if string(data[:fingerprintSize]) != string(fingerprint(key)) {
		// Sealed under a key of the subject's that has been deleted.
		return Erased, false, nil
	}
	data = data[fingerprintSize:]
	plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(subject))
	if err != nil {
		return "", false, fmt.Errorf("keyring: open for %s: %w", subject, err)
	}
	return string(plain), true, nil
}

// CurrentMaster returns the ID of the master key that wraps new keys.
func (k *Keyring) CurrentMaster() string { return k.masters.current().id }

// Forget deletes the key of subject as part of tx, which erases every value
// sealed for it, and reports whether there was one.
func (k *Keyring) Forget(ctx context.Context, tx uow.Tx, subject string) (bool, error) {
	ok, err := k.store.DeleteKey(ctx, tx, subject)
	if err != nil {
		return false, fmt.Errorf("keyring: forget %s: %w", subject, err)
	}
	return ok, nil
}

// Rotate rewraps, as part of tx, up to limit keys that a master key other
// than the current one wrapped, and returns how many it rewrapped; once it
// returns 0, no key needs the old master keys and DATA_KEY may drop them.
func (k *Keyring) Rotate(ctx context.Context, tx uow.Tx, limit int) (int, error) {
	current := k.masters.current()
	keys, err := k.store.KeysNotWrappedBy(ctx, tx, current.id, limit)
	if err != nil {
		return 0, fmt.Errorf("keyring: rotate: %w", err)
	}
	for _, w := range keys {
		key, err := k.masters.unwrap(w)
		if err != nil {
			return 0, fmt.Errorf("keyring: rotate %s: %w", w.Subject, err)
		}
		wrapped, err := current.wrap(w.Subject, key)
		if err != nil {
			return 0, fmt.Errorf("keyring: rotate %s: %w", w.Subject, err)
		}
		if err := k.store.Rewrap(ctx, tx, w.Subject, w.Master, current.id, wrapped); err != nil {
			return 0, fmt.Errorf("keyring: rotate %s: %w", w.Subject, err)
		}
	}
	return len(keys), nil
}

// errNoKey says that a subject has no key.
var errNoKey = errors.New("no key")

// key returns the unwrapped key of subject, made when create is set and
// the subject has none, and errNoKey otherwise.
func (k *Keyring) key(ctx context.Context, tx uow.Tx, subject string, create bool) ([]byte, error) {
	wrapped, master, ok, err := k.store.Key(ctx, tx, subject)
	if err != nil {
		return nil, err
	}
	if !ok {
		if !create {
			return nil, errNoKey
		}
		key := make([]byte, keySize)
		_, _ = rand.Read(key)
		current := k.masters.current()
		w, err := current.wrap(subject, key)
		if err != nil {
			return nil, err
		}
		if wrapped, master, err = k.store.AddKey(ctx, tx, subject, current.id, w); err != nil {
			return nil, err
		}
	}
	return k.masters.unwrap(WrappedKey{Subject: subject, Master: master, Wrapped: wrapped})
}

// keySize is the size of every key: AES-256.
const keySize = 32

// fingerprintSize is the length of the fingerprint that each sealed value
// begins with, which tells which of a subject's keys sealed it.
const fingerprintSize = 8

// fingerprint names a data key in the values it seals: the first bytes of
// its SHA-256, which tell nothing of a random 256-bit key.
func fingerprint(key []byte) []byte {
	sum := sha256.Sum256(key)
	return sum[:fingerprintSize]
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
