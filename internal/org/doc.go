// Package org is the organizations domain: accounts that share an
// organization, each member an owner or a member, and invitations by mail
// that an invited address accepts with a session of its own.
//
// It is event-sourced on the same core as package user, and is its second
// aggregate: each organization is one stream, "org-ID", whose events are
// named once in the domain's registry ([Events]); a command loads the
// stream, folds it into the organization's state (the evolve), decides,
// and appends what it decided at the version it loaded, in one unit of
// work with the inline views and the outbox messages of its mail and
// integration events ([Service]). Its members' joins, leaves and changes
// of role show in their accounts' activity, which the user domain keeps
// and this package adds to ([ActivitySource]).
//
// An invited address is personal data: each invitation's address is
// sealed under a key of its own, which the unit of work that accepts,
// revokes or voids the invitation forgets, and so does the sweep once it
// has expired. An organization's events hold no other address: its
// members are named by their accounts' IDs.
package org
