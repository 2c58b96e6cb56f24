package user

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
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
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails.
	plain = encoding.EncodeToString(b)
	return plain, hashSecret(plain)
}

// hashSecret returns the hex SHA-256 of a code or token as a person sent it,
// after trimming and lower-casing, so that a code typed in upper case works.
func hashSecret(plain string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(plain))))
	return hex.EncodeToString(sum[:])
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
