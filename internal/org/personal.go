package org

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
)

// An organization's events name its members by their accounts' IDs and
// hold one address only: the invited one of each [InvitationSent], which
// may be the address of a person who has no account. It is sealed with
// the keyring under a subject of the invitation's own,
// "invitation-ID", whose key is kept until the invitation expires
// ([keyring.Keyring.SealUntil]) and forgotten at once by the unit of work
// that accepts, revokes or voids it: by the sweep once it has expired
// ([Service.Sweep]), by the erasure of the address's account
// ([Service.Erased]) and by the deletion of the organization. So the log
// keeps an invited address no longer than its invitation matters.

// orgPrefix begins the name of every organization's stream.
const orgPrefix = CategoryOrg + "-"

// streamOf returns the name of the stream of the organization id.
func streamOf(id uuid.UUID) string { return orgPrefix + id.String() }

// OrgOf returns the ID of the organization whose stream holds e. The
// stream names the organization, so its events need not; the fold and
// the projections take it from here. It returns an error for an event of
// any other stream.
func OrgOf(e eventstore.Event) (uuid.UUID, error) {
	rest, ok := strings.CutPrefix(e.Stream, orgPrefix)
	if !ok {
		return uuid.Nil, fmt.Errorf("org: %s %s is in stream %q, not an organization's", e.Type, e.ID, e.Stream)
	}
	id, err := uuid.Parse(rest)
	if err != nil || id == uuid.Nil || streamOf(id) != e.Stream {
		return uuid.Nil, fmt.Errorf("org: %s %s is in stream %q, which names no organization", e.Type, e.ID, e.Stream)
	}
	return id, nil
}

// invitationPrefix begins the keyring subject of every invitation.
const invitationPrefix = "invitation-"

// invitationSubject returns the keyring subject that the address of the
// invitation id is sealed for.
func invitationSubject(id uuid.UUID) string { return invitationPrefix + id.String() }

// Address returns the invited address that d holds, opened with the key
// of its invitation. A value whose key is gone gives [keyring.Erased]
// and false: the invitation was accepted, revoked, voided or swept. The
// views read addresses through it.
func Address(ctx context.Context, tx uow.Tx, keys *keyring.Keyring, d InvitationSent) (string, bool, error) {
	if keys == nil {
		return "", false, fmt.Errorf("org: a sealed address of invitation %s, and no keyring to open it", d.InvitationID)
	}
	return keys.Open(ctx, tx, invitationSubject(d.InvitationID), d.Email)
}
