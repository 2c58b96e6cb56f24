package org

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/uow"
)

// Views are the tables of the domain's inline read models (organizations,
// their members and their pending invitations), written in the same
// transaction as the events they follow, and the queries the commands and
// queries make of them. Each backend implements them; what an event does
// to them is decided by the domain's views projection, so a backend only
// runs the operations it is given. Rows of expired invitations stay until
// a sweep removes them: the service judges expiry.
//
// Every method works in the unit of work it is given, and returns an
// error wrapping [uow.ErrForeignTx] for one of another backend's.
type Views interface {
	// PutOrganization adds an organization.
	PutOrganization(ctx context.Context, tx uow.Tx, o OrganizationRow) error
	// DeleteOrganization deletes the organization with id, its members
	// and its invitations.
	DeleteOrganization(ctx context.Context, tx uow.Tx, id uuid.UUID) error
	// PutMember adds a member.
	PutMember(ctx context.Context, tx uow.Tx, m MemberRow) error
	// SetRole sets the role of a member.
	SetRole(ctx context.Context, tx uow.Tx, org, user uuid.UUID, role Role) error
	// DeleteMember deletes a member, if there.
	DeleteMember(ctx context.Context, tx uow.Tx, org, user uuid.UUID) error
	// PutInvitation adds a pending invitation.
	PutInvitation(ctx context.Context, tx uow.Tx, i InvitationRow) error
	// DeleteInvitation deletes the invitation with id, if there.
	DeleteInvitation(ctx context.Context, tx uow.Tx, id uuid.UUID) error
	// PutSent records that the account invitedBy sent the invitation id
	// at sentAt, for the limit of invitations an account sends. The
	// record outlives the invitation and its organization: neither
	// DeleteInvitation nor DeleteOrganization deletes it.
	PutSent(ctx context.Context, tx uow.Tx, id, invitedBy uuid.UUID, sentAt time.Time) error
	// SweepSent deletes up to limit records of invitations sent at or
	// before before, and returns how many.
	SweepSent(ctx context.Context, tx uow.Tx, before time.Time, limit int) (int64, error)
	// Reset empties every table as part of tx, for a rebuild from the
	// events.
	Reset(ctx context.Context, tx uow.Tx) error
	// Sweep deletes up to limit invitations that expired at or before
	// now, and returns how many.
	Sweep(ctx context.Context, tx uow.Tx, now time.Time, limit int) (int64, error)

	// Organization returns the organization with id.
	Organization(ctx context.Context, tx uow.Tx, id uuid.UUID) (OrganizationRow, bool, error)
	// OrganizationsOf returns the organizations the account user is a
	// member of, with its role in each, ordered by name (by Unicode code
	// point, as Go compares strings) and then ID.
	OrganizationsOf(ctx context.Context, tx uow.Tx, user uuid.UUID) ([]Organization, error)
	// CountOrganizationsOf returns how many organizations the account
	// user is a member of.
	CountOrganizationsOf(ctx context.Context, tx uow.Tx, user uuid.UUID) (int, error)
	// Members returns the members of the organization with id, each with
	// the address its account has now (from the user domain's views),
	// ordered by when they joined and then by ID.
	Members(ctx context.Context, tx uow.Tx, org uuid.UUID) ([]Member, error)
	// Invitations returns the invitations of the organization with id,
	// expired or not, ordered by when they were sent and then by ID.
	Invitations(ctx context.Context, tx uow.Tx, org uuid.UUID) ([]InvitationRow, error)
	// InvitationByCode returns the invitation whose code has hash.
	InvitationByCode(ctx context.Context, tx uow.Tx, codeHash string) (InvitationRow, bool, error)
	// SentBy returns the times, oldest first, of the invitations the
	// account user sent, in any organization, after since.
	SentBy(ctx context.Context, tx uow.Tx, user uuid.UUID, since time.Time) ([]time.Time, error)
	// InvitationsTo returns every invitation to email, in any
	// organization, expired or not.
	InvitationsTo(ctx context.Context, tx uow.Tx, email string) ([]InvitationRow, error)
}

// OrganizationRow is a row of the organizations table.
type OrganizationRow struct {
	ID        uuid.UUID
	Name      string
	CreatedAt time.Time
}

// MemberRow is a row of the members table.
type MemberRow struct {
	OrgID    uuid.UUID
	UserID   uuid.UUID
	Role     Role
	JoinedAt time.Time
}

// InvitationRow is a row of the pending invitations. Email is the invited
// address in the clear, as the user domain's views keep addresses; the
// row goes when the invitation is accepted, revoked or voided, or by the
// sweep once it has expired.
type InvitationRow struct {
	ID        uuid.UUID
	OrgID     uuid.UUID
	CodeHash  string
	Email     string
	Role      Role
	InvitedBy uuid.UUID
	SentAt    time.Time
	ExpiresAt time.Time
}
