package user

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// secretBytes is the size of codes and tokens: 160 random bits.
const secretBytes = 20

// encoding writes secrets in lower-case base32 without padding: letters and
// digits only, easy to copy from a mail.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newSecret returns a fresh one-time code or session token and its hash.
// Only the hash is ever stored in events and tables.
func newSecret() (plain, hash string) {
	plain = randomSecret()
	return plain, hashSecret(plain)
}

// newToken returns a fresh session token and its hash, as the session
// events hold it: [hashSecret] in bytes.
func newToken() (plain string, hash TokenHash) {
	plain = randomSecret()
	return plain, sumSecret(plain)
}

// randomSecret returns secretBytes random bytes in [encoding].
func randomSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails.
	return encoding.EncodeToString(b)
}

// hashSecret returns the hex SHA-256 of a code or token as a person sent it,
// after trimming and lower-casing, so that a code typed in upper case works.
func hashSecret(plain string) string {
	sum := sumSecret(plain)
	return hex.EncodeToString(sum[:])
}

// sumSecret is [hashSecret] in bytes.
func sumSecret(plain string) [sha256.Size]byte {
	return sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(plain))))
}

// validSecret reports whether plain has the shape of a secret, so that
// garbage is refused before it reaches the database.
func validSecret(plain string) bool {
	plain = strings.ToLower(strings.TrimSpace(plain))
	if len(plain) != encoding.EncodedLen(secretBytes) {
		return false
	}
	_, err := encoding.DecodeString(plain)
	return err == nil
}

// sameHash compares two secret hashes in constant time.
func sameHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// TokenHash is the SHA-256 of a session token in its 32 bytes, which
// JSON writes in base64, 44 characters, as it writes a []byte, where the
// hex of [hashSecret] takes 64. The views and the commands key a session
// by its hex ([TokenHash.Hex]).
type TokenHash [sha256.Size]byte

// ParseTokenHash returns the hash whose hex form is s: 64 lower-case hex
// digits, the form [hashSecret] gives. It refuses any other, so that
// [TokenHash.Hex] gives s back.
func ParseTokenHash(s string) (TokenHash, error) {
	var h TokenHash
	if len(s) != hex.EncodedLen(len(h)) {
		return TokenHash{}, fmt.Errorf("user: token hash of %d characters, want %d hex digits", len(s), hex.EncodedLen(len(h)))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil || h.Hex() != s {
		return TokenHash{}, errors.New("user: token hash is not in lower-case hex")
	}
	return h, nil
}

// Hex returns h in hex, as [hashSecret] writes it.
func (h TokenHash) Hex() string { return hex.EncodeToString(h[:]) }

// MarshalText writes h in base64.
func (h TokenHash) MarshalText() ([]byte, error) {
	return base64.StdEncoding.AppendEncode(nil, h[:]), nil
}

// UnmarshalText reads h from base64, and refuses anything but 32 bytes.
func (h *TokenHash) UnmarshalText(text []byte) error {
	b, err := base64.StdEncoding.AppendDecode(nil, text)
	if err != nil {
		return fmt.Errorf("user: token hash: %w", err)
	}
	if len(b) != len(h) {
		return fmt.Errorf("user: token hash of %d bytes, want %d", len(b), len(h))
	}
	copy(h[:], b)
	return nil
}
