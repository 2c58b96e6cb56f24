// Package user is the account domain: passwordless sign-in by emailed link,
// sessions, change of address confirmed by a link sent to the new one, and
// erasure of an account at its owner's request.
//
// It is event-sourced. Two kinds of stream hold its facts: "signin-HASH"
// has the sign-in links sent to one mailbox, every spelling of it, so that
// a mailbox can be limited and its codes used once whether or not it has
// an account, and
// "user-ID" has one account. Each event is defined beside the command that
// appends it (signin.go, account.go, emailchange.go, erase.go). Each
// command of a [Service] is one unit of work: it loads the streams it
// needs, decides, appends events with optimistic concurrency, applies them
// to the inline views, and adds the outbox messages for its mail. A request
// for a sign-in link first presumes its address quiet, decides without
// loading, and appends on that condition ([Service.RequestSignInLink]). A query,
// which changes nothing, is a read-only unit of work ([uow.Runner.Read]).
//
// Addresses are personal data: every one in an event is sealed with the
// keyring under a key that an erasure or the sweep forgets (personal.go),
// so the service needs a keyring.
//
// The domain decides what an event means for a read model, once, and the
// backends execute it. [ViewsProjection] turns each event into operations
// on the tables of [Views] (put a session, end it, drop a user, ...), in
// the transaction of the command; [ActivityProjection] turns events into
// rows of the [ActivityStore], asynchronously, as a projection that can be
// rebuilt blue/green, those of other domains through their
// [ActivitySource]. A backend implements Views and ActivityStore in SQL
// and names no event of this package; the suite in viewstest holds each
// backend to the same answers.
package user
