// Package keyring encrypts personal data with a key per person, so that
// deleting the key erases the data wherever it was written: in events,
// which stay immutable, and in every copy of them (crypto-shredding).
//
// Each subject (a person, or an address that asked for a link) has data
// keys of 256 random bits, kept in the store wrapped (encrypted) by a
// master key from the environment, DATA_KEY. Each unit of work that seals
// for a subject makes a key of its own, named within the subject by its
// fingerprint, which every value it seals begins with: so a seal costs no
// read, only an insert that can go with the unit of work's next statement,
// and units of work that seal for one subject at once never contend. Data
// is sealed with AES-256-GCM, the subject bound in as associated data, so
// a value cannot be moved to another subject; keys are wrapped with
// XChaCha20-Poly1305, bound to their subject and ID. Forgetting a subject
// deletes all its keys. A master key has an ID: DATA_KEY may list several,
// the first wrapping new keys and the others only unwrapping old ones,
// until [Keyring.Rotate] has rewrapped every key with the first. The store
// records which master keys wrap its keys, so that a process given the
// wrong ones is stopped before it seals or opens anything
// ([Keyring.Check]).
package keyring
