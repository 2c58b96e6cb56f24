package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/uow"
)

// OrgViews are the tables of the organizations domain's inline read
// models on SQLite ([org.Views]), with the meaning of the PostgreSQL
// backend's: organizations, org_members and org_invitations. The domain's
// views projection decides what each event does to them. The rows of
// expired invitations stay until a sweep ([OrgViews.Sweep]) deletes them.
// They work in the transaction of the unit of work they are given.
type OrgViews struct{}

var _ org.Views = OrgViews{}

// PutOrganization adds an organization.
func (OrgViews) PutOrganization(ctx context.Context, t uow.Tx, o org.OrganizationRow) error {
	return orgWrite(ctx, t, "put organization", `INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)`,
		o.ID, o.Name, micros(o.CreatedAt))
}

// DeleteOrganization deletes the organization with id, its members and its
// invitations.
func (OrgViews) DeleteOrganization(ctx context.Context, t uow.Tx, id uuid.UUID) error {
	s := id.String()
	for _, q := range []string{
		`DELETE FROM org_members WHERE org_id = ?`,
		`DELETE FROM org_invitations WHERE org_id = ?`,
		`DELETE FROM organizations WHERE id = ?`,
	} {
		if err := orgWrite(ctx, t, "delete organization", q, s); err != nil {
			return err
		}
	}
	return nil
}

// PutMember adds a member.
func (OrgViews) PutMember(ctx context.Context, t uow.Tx, m org.MemberRow) error {
	return orgWrite(ctx, t, "put member", `INSERT INTO org_members (org_id, user_id, role, joined_at) VALUES (?, ?, ?, ?)`,
		m.OrgID, m.UserID, m.Role, micros(m.JoinedAt))
}

// SetRole sets the role of a member.
func (OrgViews) SetRole(ctx context.Context, t uow.Tx, orgID, userID uuid.UUID, role org.Role) error {
	return orgWrite(ctx, t, "set role", `UPDATE org_members SET role = ? WHERE org_id = ? AND user_id = ?`,
		role, orgID, userID)
}

// DeleteMember deletes a member, if there.
func (OrgViews) DeleteMember(ctx context.Context, t uow.Tx, orgID, userID uuid.UUID) error {
	return orgWrite(ctx, t, "delete member", `DELETE FROM org_members WHERE org_id = ? AND user_id = ?`, orgID, userID)
}

// PutInvitation adds a pending invitation.
func (OrgViews) PutInvitation(ctx context.Context, t uow.Tx, i org.InvitationRow) error {
	return orgWrite(ctx, t, "put invitation", `
INSERT INTO org_invitations (code_hash, id, org_id, email, role, invited_by, sent_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		i.CodeHash, i.ID, i.OrgID, i.Email, i.Role, i.InvitedBy, micros(i.SentAt), micros(i.ExpiresAt))
}

// DeleteInvitation deletes the invitation with id, if there.
func (OrgViews) DeleteInvitation(ctx context.Context, t uow.Tx, id uuid.UUID) error {
	return orgWrite(ctx, t, "delete invitation", `DELETE FROM org_invitations WHERE id = ?`, id)
}

// PutSent records that the account invitedBy sent the invitation id at
// sentAt.
func (OrgViews) PutSent(ctx context.Context, t uow.Tx, id, invitedBy uuid.UUID, sentAt time.Time) error {
	return orgWrite(ctx, t, "put sent", `INSERT INTO org_invitations_sent (id, invited_by, sent_at) VALUES (?, ?, ?)`,
		id, invitedBy, micros(sentAt))
}

// SweepSent deletes up to limit records of invitations sent at or before
// before, and returns how many it deleted.
func (OrgViews) SweepSent(ctx context.Context, t uow.Tx, before time.Time, limit int) (int64, error) {
	return orgDelete(ctx, t, "sweep sent", `DELETE FROM org_invitations_sent WHERE id IN
(SELECT id FROM org_invitations_sent WHERE sent_at <= ? LIMIT ?)`, micros(before), limit)
}

// SentBy returns the times, oldest first, of the invitations the account
// user sent after since.
func (OrgViews) SentBy(ctx context.Context, t uow.Tx, user uuid.UUID, since time.Time) ([]time.Time, error) {
	return orgQuery(ctx, t, "sent by", `
SELECT sent_at FROM org_invitations_sent WHERE invited_by = ? AND sent_at > ? ORDER BY sent_at`,
		[]any{user, micros(since)}, func(rows *sql.Rows) (time.Time, error) {
			var us int64
			err := rows.Scan(&us)
			return fromMicros(us), err
		})
}

// Reset empties the views as part of t, for a rebuild. The unit of work
// holds the database's write lock, so commands wait for the rebuild
// instead of writing into half-built tables.
func (OrgViews) Reset(ctx context.Context, t uow.Tx) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("org views: reset: %w", err)
	}
	for _, table := range []string{"organizations", "org_members", "org_invitations", "org_invitations_sent"} {
		if _, err := st.ExecContext(ctx, `DELETE FROM `+table); err != nil {
			return fmt.Errorf("org views: reset %s: %w", table, err)
		}
	}
	return nil
}

// Sweep deletes up to limit invitations that expired at or before now,
// and returns how many it deleted.
func (OrgViews) Sweep(ctx context.Context, t uow.Tx, now time.Time, limit int) (int64, error) {
	return orgDelete(ctx, t, "sweep", `DELETE FROM org_invitations WHERE code_hash IN
(SELECT code_hash FROM org_invitations WHERE expires_at <= ? LIMIT ?)`, micros(now), limit)
}

// Organization returns the organization with id.
func (OrgViews) Organization(ctx context.Context, t uow.Tx, id uuid.UUID) (org.OrganizationRow, bool, error) {
	o := org.OrganizationRow{ID: id}
	var created int64
	found, err := orgQueryRow(ctx, t, "organization", `SELECT name, created_at FROM organizations WHERE id = ?`,
		[]any{id}, &o.Name, &created)
	if !found {
		return org.OrganizationRow{}, found, err
	}
	o.CreatedAt = fromMicros(created)
	return o, found, err
}

// OrganizationsOf returns the organizations the account user is a member
// of, with its role in each, ordered by name (by its bytes, which in
// UTF-8 is by code point) and then by ID.
func (OrgViews) OrganizationsOf(ctx context.Context, t uow.Tx, userID uuid.UUID) ([]org.Organization, error) {
	return orgQuery(ctx, t, "organizations of", `
SELECT o.id, o.name, o.created_at, m.role
  FROM org_members m JOIN organizations o ON o.id = m.org_id
 WHERE m.user_id = ?
 ORDER BY o.name, o.id`, []any{userID}, func(rows *sql.Rows) (org.Organization, error) {
		var o org.Organization
		var created int64
		err := rows.Scan(&o.ID, &o.Name, &created, &o.Role)
		o.CreatedAt = fromMicros(created)
		return o, err
	})
}

// CountOrganizationsOf returns how many organizations the account user is
// a member of: as many as [OrgViews.OrganizationsOf] lists.
func (OrgViews) CountOrganizationsOf(ctx context.Context, t uow.Tx, userID uuid.UUID) (int, error) {
	var n int
	_, err := orgQueryRow(ctx, t, "count organizations of", `
SELECT count(*) FROM org_members m JOIN organizations o ON o.id = m.org_id WHERE m.user_id = ?`,
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
 WHERE m.org_id = ?
 ORDER BY m.joined_at, m.user_id`, []any{orgID}, func(rows *sql.Rows) (org.Member, error) {
		var m org.Member
		var joined int64
		err := rows.Scan(&m.UserID, &m.Email, &m.Role, &joined)
		m.JoinedAt = fromMicros(joined)
		return m, err
	})
}

// selectInvitations reads invitations; a WHERE follows.
const selectInvitations = `
SELECT id, org_id, code_hash, email, role, invited_by, sent_at, expires_at FROM org_invitations`

// invitationScan scans a row of selectInvitations.
type invitationScan struct {
	i             org.InvitationRow
	sent, expires int64
}

func (s *invitationScan) fields() []any {
	return []any{&s.i.ID, &s.i.OrgID, &s.i.CodeHash, &s.i.Email, &s.i.Role, &s.i.InvitedBy, &s.sent, &s.expires}
}

func (s *invitationScan) row() org.InvitationRow {
	i := s.i
	i.SentAt, i.ExpiresAt = fromMicros(s.sent), fromMicros(s.expires)
	return i
}

func scanInvitation(rows *sql.Rows) (org.InvitationRow, error) {
	var s invitationScan
	err := rows.Scan(s.fields()...)
	return s.row(), err
}

// Invitations returns the invitations of the organization with id,
// ordered by when they were sent and then by ID.
func (OrgViews) Invitations(ctx context.Context, t uow.Tx, orgID uuid.UUID) ([]org.InvitationRow, error) {
	return orgQuery(ctx, t, "invitations", selectInvitations+` WHERE org_id = ? ORDER BY sent_at, id`,
		[]any{orgID}, scanInvitation)
}

// InvitationByCode returns the invitation whose code has hash.
func (OrgViews) InvitationByCode(ctx context.Context, t uow.Tx, codeHash string) (org.InvitationRow, bool, error) {
	var s invitationScan
	found, err := orgQueryRow(ctx, t, "invitation by code", selectInvitations+` WHERE code_hash = ?`,
		[]any{codeHash}, s.fields()...)
	if !found {
		return org.InvitationRow{}, found, err
	}
	return s.row(), found, err
}

// InvitationsTo returns every invitation to email, ordered by when they
// were sent and then by ID.
func (OrgViews) InvitationsTo(ctx context.Context, t uow.Tx, email string) ([]org.InvitationRow, error) {
	return orgQuery(ctx, t, "invitations to", selectInvitations+` WHERE email = ? ORDER BY sent_at, id`,
		[]any{email}, scanInvitation)
}

// orgWrite runs a write of the views.
func orgWrite(ctx context.Context, t uow.Tx, op, q string, args ...any) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("org views: %s: %w", op, err)
	}
	if _, err := st.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("org views: %s: %w", op, err)
	}
	return nil
}

// orgDelete runs the delete q and returns how many rows it deleted.
func orgDelete(ctx context.Context, t uow.Tx, op, q string, args ...any) (int64, error) {
	st, err := asTx(t)
	if err != nil {
		return 0, fmt.Errorf("org views: %s: %w", op, err)
	}
	res, err := st.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("org views: %s: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("org views: %s: %w", op, err)
	}
	return n, nil
}

// orgQueryRow scans the one row of q into dest and reports whether there
// was one.
func orgQueryRow(ctx context.Context, t uow.Tx, op, q string, args []any, dest ...any) (bool, error) {
	st, err := asTx(t)
	if err != nil {
		return false, fmt.Errorf("org views: %s: %w", op, err)
	}
	err = st.QueryRowContext(ctx, q, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("org views: %s: %w", op, err)
	}
	return true, nil
}

// orgQuery returns the rows of q, each scanned by scan.
func orgQuery[T any](ctx context.Context, t uow.Tx, op, q string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, fmt.Errorf("org views: %s: %w", op, err)
	}
	rows, err := st.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("org views: %s: %w", op, err)
	}
	defer rows.Close()
	var list []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("org views: %s: %w", op, err)
		}
		list = append(list, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("org views: %s: %w", op, err)
	}
	return list, nil
}
