package org

import (
	"github.com/google/uuid"
)

// The events that begin and end an organization's stream.
const (
	TypeCreated = "org.created"
	TypeDeleted = "org.deleted"
)

// Created begins an organization's stream: an account created it, named
// Name, and became its first owner, which the [MemberAdded] appended
// with it records. The stream names the organization ([OrgOf]).
type Created struct {
	Name      string    `json:"name"`
	CreatedBy uuid.UUID `json:"created_by"`
}

// The reasons of a [Deleted].
const (
	// DeletedByOwner is an owner's deletion ([Service.Delete]).
	DeletedByOwner = "deleted"
	// DeletedErased is the erasure of the last member's account
	// ([Service.Erased]).
	DeletedErased = "erased"
)

// Deleted ends an organization's stream: its members are no longer
// members, and its pending invitations were voided by the events before
// it. By is the owner who deleted it, zero when the erasure of its last
// member's account did.
type Deleted struct {
	By     uuid.UUID `json:"by,omitzero"`
	Reason string    `json:"reason"`
}
