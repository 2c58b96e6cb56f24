package org

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"strings"
)

// An invitation's code is made and hashed as the user domain's one-time
// codes are: 160 random bits in 32 lower-case base32 characters, of which
// only the SHA-256 is ever stored.

// codeBytes is the size of a code.
const codeBytes = 20

// encoding writes codes in lower-case base32 without padding: letters and
// digits only, easy to copy from a mail.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newCode returns a fresh invitation code and its hash.
func newCode() (plain, hash string) {
	b := make([]byte, codeBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails.
	plain = encoding.EncodeToString(b)
	return plain, hashCode(plain)
}

// hashCode returns the hex SHA-256 of a code as a person sent it, after
// trimming and lower-casing, so that a code typed in upper case works.
func hashCode(plain string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(plain))))
	return hex.EncodeToString(sum[:])
}

// validCode reports whether plain has the shape of a code, so that
// garbage is refused before it reaches the database.
func validCode(plain string) bool {
	plain = strings.ToLower(strings.TrimSpace(plain))
	if len(plain) != encoding.EncodedLen(codeBytes) {
		return false
	}
	_, err := encoding.DecodeString(plain)
	return err == nil
}

// sameHash compares two code hashes in constant time.
func sameHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
