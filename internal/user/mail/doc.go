// Package mail sends the user domain's mail: the sign-in link, the
// confirmation of a new address, the notice to the owner of an address
// that another account asked for, the notice of a change to the address
// an account left, and the invitation into an organization, which the
// organizations domain adds. It holds the outbox topics ([Topics]),
// the payload that the user commands add for them ([Link]), and the outbox
// handlers that compose each mail and send it through a [Sender]
// ([Handlers]).
//
// Delivery is the relay's, at least once, so a mail may arrive twice: its
// Message-ID comes from the outbox message's ID, the same on every resend,
// so that a mail system can tell a resend. A link that expired before its
// message was delivered, or whose code the sweep removed, is dropped
// rather than sent. A mail whose recipient is refused for good
// ([ErrRefused]) fails as [outbox.ErrPermanent]. The plain code lives only in the outbox message and
// the mail; [Console] prints it on a terminal, never in a log.
//
// Each mail spends its recipient's mailbox's [Budget] before it is sent,
// and one that finds it spent is held back: acknowledged, never sent,
// counted as mail.held_back and logged by topic and message ID, never by
// address. The request that set it off was answered before, the same
// either way.
package mail
