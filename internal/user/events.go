package user

import (
	"time"

	"github.com/google/uuid"
)

// Event types. Each event's data is the struct of the same name, as JSON.
// Codes and tokens appear only as their SHA-256 hash, and addresses only
// sealed under the key of the event's stream (personal.go), except in
// events written before addresses were sealed; [Address] reads both.
const (
	// Stream "signin-HASH": the sign-in links of one address, named by a
	// keyed hash of it (personal.go).
	TypeSignInLinkRequested = "signin.link_requested"
	TypeSignInLinkUsed      = "signin.link_used"

	// Stream "user-<id>": one account.
	TypeRegistered           = "user.registered"
	TypeSessionStarted       = "user.session_started"
	TypeSessionEnded         = "user.session_ended"
	TypeEmailChangeRequested = "user.email_change_requested"
	TypeEmailChanged         = "user.email_changed"
)

// SignInLinkRequested records a sign-in link sent to an address.
type SignInLinkRequested struct {
	Email     string    `json:"email"`
	CodeHash  string    `json:"code_hash"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SignInLinkUsed records the one use of a sign-in code. Email is the
// address in events written before addresses were sealed; later events
// leave it out: the stream's first event of the link holds it, sealed.
type SignInLinkUsed struct {
	Email    string    `json:"email,omitempty"`
	CodeHash string    `json:"code_hash"`
	UserID   uuid.UUID `json:"user_id"`
}

// Registered records the creation of an account at its first sign-in.
type Registered struct {
	UserID uuid.UUID `json:"user_id"`
	Email  string    `json:"email"`
}

// SessionStarted records a sign-in.
type SessionStarted struct {
	UserID    uuid.UUID `json:"user_id"`
	TokenHash string    `json:"token_hash"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SessionEnded records a sign-out.
type SessionEnded struct {
	UserID    uuid.UUID `json:"user_id"`
	TokenHash string    `json:"token_hash"`
}

// EmailChangeRequested records a request to move to a new address: a
// confirmation link mailed to it, or, when the address had an account of
// its own at the time (Taken), a mail to it that says so and carries no
// link. Either way the request counts against the user's limit and shows
// in their activity alike, so the answer tells nobody whether an address
// has an account; a taken request's CodeHash is that of a code no mail
// carries, and it keeps no NewEmail, which is the owner's. NewEmail is
// sealed for the change alone ("change-CODEHASH"), whose key the sweep
// forgets once the request no longer matters (the longer of LinkWindow
// and LinkTTL, and a margin), and the erasure of the address's account
// forgets at once while the confirmation mail is still in the outbox
// with its code.
type EmailChangeRequested struct {
	UserID    uuid.UUID `json:"user_id"`
	NewEmail  string    `json:"new_email,omitempty"`
	CodeHash  string    `json:"code_hash"`
	ExpiresAt time.Time `json:"expires_at"`
	Taken     bool      `json:"taken,omitempty"`
}

// EmailChanged records a confirmed change of address.
type EmailChanged struct {
	UserID   uuid.UUID `json:"user_id"`
	OldEmail string    `json:"old_email"`
	NewEmail string    `json:"new_email"`
	CodeHash string    `json:"code_hash"`
}
