package keyring

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// Masters are the master keys of DATA_KEY: the first wraps new keys, and
// every one unwraps the keys it wrapped.
type Masters struct {
	keys []master
}

// master is one master key, its ID, and the cipher it wraps with:
// XChaCha20-Poly1305, whose random 192-bit nonces stay unique however
// many keys one master key wraps (a key per unit of work that seals),
// where AES-GCM's 96-bit ones would call for a new master key after some
// billions.
type master struct {
	id   string
	aead cipher.AEAD
}

// ParseMasters parses DATA_KEY: one or more ID:KEY separated by commas,
// each ID of 1 to 32 lower-case letters, digits and hyphens, each KEY the
// base64 (standard or URL alphabet, padded or not) of 32 random bytes. The
// first is the current key. The error never shows a key.
func ParseMasters(s string) (Masters, error) {
	var m Masters
	seen := map[string]bool{}
	for i, part := range strings.Split(s, ",") {
		id, encoded, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return Masters{}, fmt.Errorf("key %d is not ID:KEY", i+1)
		}
		if !validID(id) {
			return Masters{}, fmt.Errorf("key %d: ID %q is not 1 to 32 of a-z, 0-9 and -", i+1, id)
		}
		if seen[id] {
			return Masters{}, fmt.Errorf("key %d: ID %q is listed twice", i+1, id)
		}
		seen[id] = true
		key, err := decodeKey(encoded)
		if err != nil {
			return Masters{}, fmt.Errorf("key %s: %w", id, err)
		}
		aead, err := chacha20poly1305.NewX(key)
		if err != nil {
			return Masters{}, fmt.Errorf("key %s: %w", id, err)
		}
		m.keys = append(m.keys, master{id: id, aead: aead})
	}
	return m, nil
}

// NewMasterKey returns a DATA_KEY of one fresh key with the ID id.
func NewMasterKey(id string) (string, error) {
	if !validID(id) {
		return "", fmt.Errorf("keyring: ID %q is not 1 to 32 of a-z, 0-9 and -", id)
	}
	key := make([]byte, keySize)
	_, _ = rand.Read(key)
	return id + ":" + base64.RawURLEncoding.EncodeToString(key), nil
}

// LoadOrCreateKeyFile returns the master keys kept in the file at path,
// creating it with one fresh key (readable by its owner only) when it does
// not exist, and reports whether it created it. It is for trying the
// service on SQLite without DATA_KEY: the key sits beside the data it
// protects, which protects nothing against someone who has both.
func LoadOrCreateKeyFile(path string) (Masters, bool, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		value, err := NewMasterKey("local")
		if err != nil {
			return Masters{}, false, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			// Another process made it meanwhile.
			m, err := readKeyFile(path)
			return m, false, err
		}
		if err != nil {
			return Masters{}, false, fmt.Errorf("keyring: create key file: %w", err)
		}
		if _, err := f.WriteString(value + "\n"); err != nil {
			f.Close()
			return Masters{}, false, fmt.Errorf("keyring: write key file: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return Masters{}, false, fmt.Errorf("keyring: write key file: %w", err)
		}
		if err := f.Close(); err != nil {
			return Masters{}, false, fmt.Errorf("keyring: write key file: %w", err)
		}
		m, err := ParseMasters(value)
		return m, true, err
	}
	if err != nil {
		return Masters{}, false, fmt.Errorf("keyring: read key file: %w", err)
	}
	m, err := parseKeyFile(path, raw)
	return m, false, err
}

// readKeyFile returns the master keys of the key file at path.
func readKeyFile(path string) (Masters, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Masters{}, fmt.Errorf("keyring: read key file: %w", err)
	}
	return parseKeyFile(path, raw)
}

func parseKeyFile(path string, raw []byte) (Masters, error) {
	m, err := ParseMasters(strings.TrimSpace(string(raw)))
	if err != nil {
		return Masters{}, fmt.Errorf("keyring: key file %s: %w", path, err)
	}
	return m, nil
}

// IDs returns the IDs of the master keys, the current one first.
func (m Masters) IDs() []string {
	ids := make([]string, len(m.keys))
	for i, k := range m.keys {
		ids[i] = k.id
	}
	return ids
}

func (m Masters) current() master { return m.keys[0] }

// unwrap returns the key in w, unwrapped by the master key that wrapped it.
func (m Masters) unwrap(w WrappedKey) ([]byte, error) {
	for _, k := range m.keys {
		if k.id != w.Master {
			continue
		}
		aead := k.aead
		if len(w.Wrapped) < aead.NonceSize() {
			return nil, errors.New("wrapped key too short")
		}
		key, err := aead.Open(nil, w.Wrapped[:aead.NonceSize()], w.Wrapped[aead.NonceSize():], wrapAD(w.Subject, w.ID))
		if err != nil {
			return nil, fmt.Errorf("unwrap with master key %s: %w", k.id, err)
		}
		return key, nil
	}
	return nil, fmt.Errorf("master key %q, which wrapped the key, is not in DATA_KEY", w.Master)
}

// wrap encrypts the key id of subject under k.
func (k master) wrap(subject, id string, key []byte) ([]byte, error) {
	aead := k.aead
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(key)+aead.Overhead())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, key, wrapAD(subject, id)), nil
}

// wrapAD is the associated data of a wrapped key: a key unwraps only as
// the key of the subject and ID it was made for.
func wrapAD(subject, id string) []byte { return []byte("data key " + id + " of " + subject) }

func validID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func decodeKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.RawStdEncoding} {
		if key, err := enc.DecodeString(s); err == nil {
			if len(key) != keySize {
				return nil, fmt.Errorf("the key is %d bytes, want %d", len(key), keySize)
			}
			return key, nil
		}
	}
	return nil, errors.New("the key is not base64")
}
