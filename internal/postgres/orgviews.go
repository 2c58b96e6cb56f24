package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/uow"
)

// OrgViews are the tables of the organizations domain's inline read
// models on PostgreSQL ([org.Views]): organizations, org_members,
// org_invitations and org_invitations_sent. The domain's views projection decides what each event
// does to them. The rows of expired invitations stay until a sweep
// ([OrgViews.Sweep]) deletes them.
//
// Their writes go to the server with the transaction's next statement or
// its commit, not in round trips of their own; an error of theirs is
// returned there, and the transaction rolls back. No command acts on one:
// the domain decides from its events, not from these tables.
type OrgViews struct{}

var _ org.Views = OrgViews{}

// PutOrganization adds an organization.
func (OrgViews) PutOrganization(ctx context.Context, t uow.Tx, o org.OrganizationRow) error {
	return orgWrite(ctx, t, "put organization", `INSERT INTO organizations (id, name, created_at) VALUES ($1, $2, $3)`,
		o.ID, o.Name, o.CreatedAt)
}

// DeleteOrganization deletes the organization with id, its members and its
// invitations, in one statement.
func (OrgViews) DeleteOrganization(ctx context.Context, t uow.Tx, id uuid.UUID) error {
	return orgWrite(ctx, t, "delete organization", `
WITH members AS (DELETE FROM org_members WHERE org_id = $1),
     invitations AS (DELETE FROM org_invitations WHERE org_id = $1)
DELETE FROM organizations WHERE id = $1`, id)
}

// PutMember adds a member.
func (OrgViews) PutMember(ctx context.Context, t uow.Tx, m org.MemberRow) error {
	return orgWrite(ctx, t, "put member", `INSERT INTO org_members (org_id, user_id, role, joined_at) VALUES ($1, $2, $3, $4)`,
		m.OrgID, m.UserID, m.Role, m.JoinedAt)
}

// SetRole sets the role of a member.
func (OrgViews) SetRole(ctx context.Context, t uow.Tx, orgID, userID uuid.UUID, role org.Role) error {
	return orgWrite(ctx, t, "set role", `UPDATE org_members SET role = $3 WHERE org_id = $1 AND user_id = $2`,
		orgID, userID, role)
}

// DeleteMember deletes a member, if there.
func (OrgViews) DeleteMember(ctx context.Context, t uow.Tx, orgID, userID uuid.UUID) error {
	return orgWrite(ctx, t, "delete member", `DELETE FROM org_members WHERE org_id = $1 AND user_id = $2`, orgID, userID)
}

// PutInvitation adds a pending invitation.
func (OrgViews) PutInvitation(ctx context.Context, t uow.Tx, i org.InvitationRow) error {
	return orgWrite(ctx, t, "put invitation", `
INSERT INTO org_invitations (code_hash, id, org_id, email, role, invited_by, sent_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		i.CodeHash, i.ID, i.OrgID, i.Email, i.Role, i.InvitedBy, i.SentAt, i.ExpiresAt)
}

// DeleteInvitation deletes the invitation with id, if there.
func (OrgViews) DeleteInvitation(ctx context.Context, t uow.Tx, id uuid.UUID) error {
	return orgWrite(ctx, t, "delete invitation", `DELETE FROM org_invitations WHERE id = $1`, id)
}

// PutSent records that the account invitedBy sent the invitation id at
// sentAt.
func (OrgViews) PutSent(ctx context.Context, t uow.Tx, id, invitedBy uuid.UUID, sentAt time.Time) error {
	return orgWrite(ctx, t, "put sent", `INSERT INTO org_invitations_sent (id, invited_by, sent_at) VALUES ($1, $2, $3)`,
		id, invitedBy, sentAt)
}

// SweepSent deletes up to limit records of invitations sent at or before
// before, and returns how many it deleted.
func (OrgViews) SweepSent(ctx context.Context, t uow.Tx, before time.Time, limit int) (int64, error) {
	return orgDelete(ctx, t, "sweep sent", `DELETE FROM org_invitations_sent WHERE id IN
    (SELECT id FROM org_invitations_sent WHERE sent_at <= $1 LIMIT $2)`, before, limit)
}

// SentBy returns the times, oldest first, of the invitations the account
// user sent after since.
func (OrgViews) SentBy(ctx context.Context, t uow.Tx, user uuid.UUID, since time.Time) ([]time.Time, error) {
	return orgQuery(ctx, t, "sent by", `
SELECT sent_at FROM org_invitations_sent WHERE invited_by = $1 AND sent_at > $2 ORDER BY sent_at`,
		[]any{user, since}, func(row pgx.CollectableRow) (time.Time, error) {
			var at time.Time
			err := row.Scan(&at)
			return at.UTC(), err
		})
}

// Reset empties the views as part of t, for a rebuild. TRUNCATE locks the
// tables until t ends, so commands wait for the rebuild instead of
// writing into half-built tables.
func (OrgViews) Reset(ctx context.Context, t uow.Tx) error {
	ptx, err := PgxTx(t)
	if err != nil {
		return fmt.Errorf("org views: reset: %w", err)
	}
	if _, err := ptx.Exec(ctx, `TRUNCATE organizations, org_members, org_invitations, org_invitations_sent`); err != nil {
		return fmt.Errorf("org views: reset: %w", err)
	}
	return nil
}

// Sweep deletes up to limit invitations that expired at or before now,
// and returns how many it deleted.
func (OrgViews) Sweep(ctx context.Context, t uow.Tx, now time.Time, limit int) (int64, error) {
	return orgDelete(ctx, t, "sweep", `DELETE FROM org_invitations WHERE code_hash IN
    (SELECT code_hash FROM org_invitations WHERE expires_at <= $1 LIMIT $2)`, now, limit)
}

// Organization returns the organization with id.
func (OrgViews) Organization(ctx context.Context, t uow.Tx, id uuid.UUID) (org.OrganizationRow, bool, error) {
	o := org.OrganizationRow{ID: id}
	found, err := orgQueryRow(ctx, t, "organization", `SELECT name, created_at FROM organizations WHERE id = $1`,
		[]any{id}, &o.Name, &o.CreatedAt)
	if !found {
		return org.OrganizationRow{}, found, err
	}
	o.CreatedAt = o.CreatedAt.UTC()
	return o, found, err
}

// OrganizationsOf returns the organizations the account user is a member
// of, with its role in each, ordered by name (by code point, as the
// column's collation sorts) and then by ID.
func (OrgViews) OrganizationsOf(ctx context.Context, t uow.Tx, userID uuid.UUID) ([]org.Organization, error) {
	return orgQuery(ctx, t, "organizations of", `
SELECT o.id, o.name, o.created_at, m.role
  FROM org_members m JOIN organizations o ON o.id = m.org_id
 WHERE m.user_id = $1
 ORDER BY o.name, o.id`, []any{userID}, func(row pgx.CollectableRow) (org.Organization, error) {
		var o org.Organization
		err := row.Scan(&o.ID, &o.Name, &o.CreatedAt, &o.Role)
		o.CreatedAt = o.CreatedAt.UTC()
		return o, err
	})
}

// CountOrganizationsOf returns how many organizations the account user is
// a member of: as many as [OrgViews.OrganizationsOf] lists.
func (OrgViews) CountOrganizationsOf(ctx context.Context, t uow.Tx, userID uuid.UUID) (int, error) {
	var n int
	_, err := orgQueryRow(ctx, t, "count organizations of", `
SELECT count(*) FROM org_members m JOIN organizations o ON o.id = m.org_id WHERE m.user_id = $1`,
		[]any{userID}, &n)
	return n, err
}

// Members returns the members of the organization with id, each with the
// address its account has now in the user views' users table, ordered by
// when they joined and then by ID. A member whose account has no row there
// is left out.
func (OrgViews) Members(ctx context.Context, t uow.Tx, orgID uuid.UUID) ([]org.Member, error) {
	return orgQuery(ctx, t, "members", `
SELECT m.user_id, u.email, m.role, m.joined_at
  FROM org_members m JOIN users u ON u.id = m.user_id
 WHERE m.org_id = $1
 ORDER BY m.joined_at, m.user_id`, []any{orgID}, func(row pgx.CollectableRow) (org.Member, error) {
		var m org.Member
		err := row.Scan(&m.UserID, &m.Email, &m.Role, &m.JoinedAt)
		m.JoinedAt = m.JoinedAt.UTC()
		return m, err
	})
}

// selectInvitations reads invitations; a WHERE follows.
const selectInvitations = `
SELECT id, org_id, code_hash, email, role, invited_by, sent_at, expires_at FROM org_invitations`

// Invitations returns the invitations of the organization with id,
// ordered by when they were sent and then by ID.
func (OrgViews) Invitations(ctx context.Context, t uow.Tx, orgID uuid.UUID) ([]org.InvitationRow, error) {
	return orgQuery(ctx, t, "invitations", selectInvitations+` WHERE org_id = $1 ORDER BY sent_at, id`,
		[]any{orgID}, scanInvitation)
}

// InvitationByCode returns the invitation whose code has hash.
func (OrgViews) InvitationByCode(ctx context.Context, t uow.Tx, codeHash string) (org.InvitationRow, bool, error) {
	var i org.InvitationRow
	found, err := orgQueryRow(ctx, t, "invitation by code", selectInvitations+` WHERE code_hash = $1`,
		[]any{codeHash}, invitationFields(&i)...)
	if !found {
		return org.InvitationRow{}, found, err
	}
	return utcInvitation(i), found, err
}

// InvitationsTo returns every invitation to email, ordered by when they
// were sent and then by ID.
func (OrgViews) InvitationsTo(ctx context.Context, t uow.Tx, email string) ([]org.InvitationRow, error) {
	return orgQuery(ctx, t, "invitations to", selectInvitations+` WHERE email = $1 ORDER BY sent_at, id`,
		[]any{email}, scanInvitation)
}

func invitationFields(i *org.InvitationRow) []any {
	return []any{&i.ID, &i.OrgID, &i.CodeHash, &i.Email, &i.Role, &i.InvitedBy, &i.SentAt, &i.ExpiresAt}
}

func utcInvitation(i org.InvitationRow) org.InvitationRow {
	i.SentAt, i.ExpiresAt = i.SentAt.UTC(), i.ExpiresAt.UTC()
	return i
}

func scanInvitation(row pgx.CollectableRow) (org.InvitationRow, error) {
	var i org.InvitationRow
	err := row.Scan(invitationFields(&i)...)
	return utcInvitation(i), err
}

// orgWrite runs a write of the views with the transaction's next statement.
func orgWrite(ctx context.Context, t uow.Tx, op, sql string, args ...any) error {
	pt, err := asTx(t)
	if err != nil {
		return fmt.Errorf("org views: %s: %w", op, err)
	}
	return pt.later(ctx, sql, args, func(err error) error { return fmt.Errorf("org views: %s: %w", op, err) })
}

// orgDelete runs the delete q at once and returns how many rows it
// deleted.
func orgDelete(ctx context.Context, t uow.Tx, op, q string, args ...any) (int64, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return 0, fmt.Errorf("org views: %s: %w", op, err)
	}
	tag, err := ptx.Exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("org views: %s: %w", op, err)
	}
	return tag.RowsAffected(), nil
}

// orgQueryRow scans the one row of q into dest and reports whether there
// was one.
func orgQueryRow(ctx context.Context, t uow.Tx, op, q string, args []any, dest ...any) (bool, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return false, fmt.Errorf("org views: %s: %w", op, err)
	}
	err = ptx.QueryRow(ctx, q, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("org views: %s: %w", op, err)
	}
	return true, nil
}

// orgQuery returns the rows of q, each scanned by scan.
func orgQuery[T any](ctx context.Context, t uow.Tx, op, q string, args []any, scan pgx.RowToFunc[T]) ([]T, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("org views: %s: %w", op, err)
	}
	rows, err := ptx.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("org views: %s: %w", op, err)
	}
	list, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("org views: %s: %w", op, err)
	}
	return list, nil
}
