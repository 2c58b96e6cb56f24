package mail

import "time"

// Outbox topics of the user domain's mail.
const (
	// TopicLoginLink is added when someone asks for a sign-in link.
	TopicLoginLink = "mail.login_link"
	// TopicEmailChange is added when a user asks to change their address.
	TopicEmailChange = "mail.email_change"
	// TopicEmailTaken is added when a user asks to change their address to
	// one that has an account already: the mail tells that address's owner
	// so, and carries no link.
	TopicEmailTaken = "mail.email_taken"
	// TopicEmailChanged is added when a change of address is confirmed:
	// the mail tells the address the account left, names the new one
	// masked ([Link.NewAddress]), and carries a link that undoes the
	// change.
	TopicEmailChanged = "mail.email_changed"
	// TopicOrgInvitation is added when an owner of an organization
	// invites an address into it: the mail names the organization
	// ([Link.Organization]) and carries a link and a code that accept the
	// invitation. Someone else sets it off, as a confirmation to another
	// address, so a spent budget holds it back.
	TopicOrgInvitation = "mail.org_invitation"
)

// Topics are every topic of this package, for the relay's scope, the
// erasure's deletion of every mail to an address, and the sweep of the
// codes of buried mail.
var Topics = []string{TopicLoginLink, TopicEmailChange, TopicEmailTaken, TopicEmailChanged, TopicOrgInvitation}

// neverHeld are the topics whose mail a [Budget] counts but never holds
// back, as it says why: sign-in links, and notices of a change to the
// recipient's own account. Every other topic is set off by someone other
// than the recipient, and held back.
var neverHeld = map[string]bool{TopicLoginLink: true, TopicEmailChanged: true}

// SecretFields are the fields of [Link] that carry its code, in every
// topic that has one: the sweep removes them from a buried message once
// its link has expired, so that nothing can sign in, or accept an
// invitation, with what a buried message keeps. The handlers drop a
// message without them rather than send it.
var SecretFields = []string{"code", "url"}

// Link is the payload of every topic: where to send which link (none for
// [TopicEmailTaken]), and until when it is worth sending. The plain code
// lives only here, in the outbox message, which is deleted once the mail
// is delivered.
type Link struct {
	To        string    `json:"to"`
	URL       string    `json:"url"`
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expires_at"`
	// Account is the ID of the account that asked for a confirmation to
	// another address ([TopicEmailChange]), or whose change of address
	// the mail tells the address it left ([TopicEmailChanged]), which is
	// not the recipient's: the erasure of that account finds the mail by
	// it, in every state, its code removed or not. The mail does not show
	// it.
	Account string `json:"account,omitempty"`
	// NewAddress is the address a change moved the account to, masked
	// ([TopicEmailChanged]).
	NewAddress string `json:"new_address,omitempty"`
	// Organization is the name of the organization that invites the
	// recipient ([TopicOrgInvitation]), as its owners gave it. The letter
	// shows it as one line of plain text ([plainLine]), escaped in HTML.
	Organization string `json:"organization,omitempty"`
}
