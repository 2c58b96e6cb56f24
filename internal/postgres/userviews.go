package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// UserViews are the tables of the user domain's inline read models on
// PostgreSQL ([user.Views]); [user.ViewsProjection] decides what each event
// does to them. The rows of expired codes and sessions stay until a sweep
// ([UserViews.Sweep]) deletes them, so a rebuild from the events produces
// exactly the same rows as the live views once both are swept as of the
// same time.
//
// The writes that cannot give one address to two users go to the server
// with the transaction's next statement or its commit, not in round trips
// of their own; an error of theirs is returned there, and the transaction
// rolls back. PutUser and SetEmail run at once, so that they return
// [user.ErrEmailTaken] themselves, which commands act on.
type UserViews struct{}

var _ user.Views = UserViews{}

// PutUser adds u, as [user.Views] describes.
func (UserViews) PutUser(ctx context.Context, t uow.Tx, u user.User) error {
	return writeNow(ctx, t, "put user", `INSERT INTO users (id, email, created_at) VALUES ($1, $2, $3)`, u.ID, u.Email, u.CreatedAt)
}

// SetEmail moves the user with id to email, as [user.Views] describes.
func (UserViews) SetEmail(ctx context.Context, t uow.Tx, id uuid.UUID, email string) error {
	return writeNow(ctx, t, "set email", `UPDATE users SET email = $2 WHERE id = $1`, id, email)
}

// DeleteUser deletes the user with id and the rows that are theirs, as
// [user.Views] describes, in one statement.
func (UserViews) DeleteUser(ctx context.Context, t uow.Tx, id uuid.UUID) error {
	return writeLater(ctx, t, "delete user", `
WITH gone AS (DELETE FROM users WHERE id = $1 RETURNING email),
     sessions AS (DELETE FROM sessions WHERE user_id = $1 RETURNING token_hash),
     uses AS (DELETE FROM session_uses WHERE token_hash IN (SELECT token_hash FROM sessions)),
     changes AS (DELETE FROM email_change_codes WHERE user_id = $1),
     undos AS (DELETE FROM email_undo_codes WHERE user_id = $1)
DELETE FROM signin_codes WHERE email IN (SELECT email FROM gone)`, id)
}

// PutSession adds a session.
func (UserViews) PutSession(ctx context.Context, t uow.Tx, s user.SessionRow) error {
	return writeLater(ctx, t, "put session", `
INSERT INTO sessions (token_hash, user_id, id, started_at, expires_at, client) VALUES ($1, $2, $3, $4, $5, $6)`,
		s.TokenHash, s.UserID, s.ID, s.StartedAt, s.ExpiresAt, s.Client)
}

// DeleteSession deletes the session with the token hash and its last use.
func (UserViews) DeleteSession(ctx context.Context, t uow.Tx, tokenHash string) error {
	return writeLater(ctx, t, "delete session", `
WITH uses AS (DELETE FROM session_uses WHERE token_hash = $1)
DELETE FROM sessions WHERE token_hash = $1`, tokenHash)
}

// TouchSession records a use of the session with the token hash, as
// [user.Views] describes.
func (UserViews) TouchSession(ctx context.Context, t uow.Tx, tokenHash string, at time.Time) error {
	return writeLater(ctx, t, "touch session", `
INSERT INTO session_uses (token_hash, used_at) VALUES ($1, $2)
ON CONFLICT (token_hash) DO UPDATE SET used_at = excluded.used_at WHERE session_uses.used_at < excluded.used_at`,
		tokenHash, at)
}

// PutSignInCode adds a sign-in code.
func (UserViews) PutSignInCode(ctx context.Context, t uow.Tx, c user.SignInCodeRow) error {
	return writeLater(ctx, t, "put sign-in code", `INSERT INTO signin_codes (code_hash, email, expires_at) VALUES ($1, $2, $3)`,
		c.CodeHash, c.Email, c.ExpiresAt)
}

// DeleteSignInCode deletes the sign-in code with hash.
func (UserViews) DeleteSignInCode(ctx context.Context, t uow.Tx, codeHash string) error {
	return writeLater(ctx, t, "delete sign-in code", `DELETE FROM signin_codes WHERE code_hash = $1`, codeHash)
}

// PutChangeCode adds a confirmation code.
func (UserViews) PutChangeCode(ctx context.Context, t uow.Tx, c user.ChangeCodeRow) error {
	return writeLater(ctx, t, "put change code", `INSERT INTO email_change_codes (code_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
		c.CodeHash, c.UserID, c.ExpiresAt)
}

// DeleteChangeCode deletes the confirmation code with hash.
func (UserViews) DeleteChangeCode(ctx context.Context, t uow.Tx, codeHash string) error {
	return writeLater(ctx, t, "delete change code", `DELETE FROM email_change_codes WHERE code_hash = $1`, codeHash)
}

// PutUndoCode adds the code that undoes a change of address.
func (UserViews) PutUndoCode(ctx context.Context, t uow.Tx, c user.UndoCodeRow) error {
	return writeLater(ctx, t, "put undo code", `INSERT INTO email_undo_codes (code_hash, user_id, version, expires_at) VALUES ($1, $2, $3, $4)`,
		c.CodeHash, c.UserID, c.Version, c.ExpiresAt)
}

// DeleteUndoCode deletes the undo code with hash.
func (UserViews) DeleteUndoCode(ctx context.Context, t uow.Tx, codeHash string) error {
	return writeLater(ctx, t, "delete undo code", `DELETE FROM email_undo_codes WHERE code_hash = $1`, codeHash)
}

// writeNow runs a write of the views at once.
func writeNow(ctx context.Context, t uow.Tx, op, sql string, args ...any) error {
	pt, err := asTx(t)
	if err != nil {
		return fmt.Errorf("user views: %s: %w", op, err)
	}
	if _, err := pt.q.Exec(ctx, sql, args...); err != nil {
		return viewsError(op, err)
	}
	return nil
}

// writeLater runs a write of the views with the transaction's next statement.
func writeLater(ctx context.Context, t uow.Tx, op, sql string, args ...any) error {
	pt, err := asTx(t)
	if err != nil {
		return fmt.Errorf("user views: %s: %w", op, err)
	}
	return pt.later(ctx, sql, args, func(err error) error { return viewsError(op, err) })
}

// viewsError describes err, of the write op: an address given to two
// users wraps [user.ErrEmailTaken].
func viewsError(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation && pgErr.ConstraintName == "users_email_key" {
		return fmt.Errorf("user views: %s: %w", op, user.ErrEmailTaken)
	}
	return fmt.Errorf("user views: %s: %w", op, err)
}

// Reset empties the views as part of t, for a rebuild. TRUNCATE locks
// the tables until t ends, so commands wait for the rebuild instead of
// writing into half-built tables, and the address constraint is deferred to
// the commit, when the rebuilt state must satisfy it.
func (UserViews) Reset(ctx context.Context, t uow.Tx) error {
	ptx, err := PgxTx(t)
	if err != nil {
		return fmt.Errorf("user views: reset: %w", err)
	}
	_, err = ptx.Exec(ctx, `
TRUNCATE users, sessions, signin_codes, email_change_codes, email_undo_codes;
SET CONSTRAINTS users_email_key DEFERRED`)
	if err != nil {
		return fmt.Errorf("user views: reset: %w", err)
	}
	return nil
}

// Sweep deletes up to limit rows of each table whose link or session
// expired at or before now, as [user.Views] describes, and returns how
// many it deleted.
func (UserViews) Sweep(ctx context.Context, t uow.Tx, now time.Time, limit int) (int64, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return 0, fmt.Errorf("user views: sweep: %w", err)
	}
	var n int64
	err = ptx.QueryRow(ctx, `
WITH s AS (DELETE FROM sessions WHERE token_hash IN
        (SELECT token_hash FROM sessions WHERE expires_at <= $1 LIMIT $2) RETURNING 1),
     c AS (DELETE FROM signin_codes WHERE code_hash IN
        (SELECT code_hash FROM signin_codes WHERE expires_at <= $1 LIMIT $2) RETURNING 1),
     e AS (DELETE FROM email_change_codes WHERE code_hash IN
        (SELECT code_hash FROM email_change_codes WHERE expires_at <= $1 LIMIT $2) RETURNING 1),
     u AS (DELETE FROM email_undo_codes WHERE code_hash IN
        (SELECT code_hash FROM email_undo_codes WHERE expires_at <= $1 LIMIT $2) RETURNING 1),
     -- The last uses of sessions gone, by this sweep or before.
     l AS (DELETE FROM session_uses WHERE token_hash IN
        (SELECT token_hash FROM session_uses l WHERE NOT EXISTS
            (SELECT FROM sessions s WHERE s.token_hash = l.token_hash AND s.expires_at > $1) LIMIT $2))
SELECT (SELECT count(*) FROM s) + (SELECT count(*) FROM c) + (SELECT count(*) FROM e) + (SELECT count(*) FROM u)`, now, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("user views: sweep: %w", err)
	}
	return n, nil
}

// UserByEmail returns the user who holds email, as [user.Views] describes.
func (UserViews) UserByEmail(ctx context.Context, t uow.Tx, email string) (user.User, bool, error) {
	return queryUser(ctx, t, `SELECT id, email, created_at FROM users WHERE email = $1`, email)
}

// User returns the user with id.
func (UserViews) User(ctx context.Context, t uow.Tx, id uuid.UUID) (user.User, bool, error) {
	return queryUser(ctx, t, `SELECT id, email, created_at FROM users WHERE id = $1`, id)
}

func queryUser(ctx context.Context, t uow.Tx, q string, arg any) (user.User, bool, error) {
	var u user.User
	found, err := queryRow(ctx, t, q, []any{arg}, &u.ID, &u.Email, &u.CreatedAt)
	u.CreatedAt = u.CreatedAt.UTC()
	return u, found, err
}

// SignInCode returns the address the unused sign-in code with hash was sent to.
func (UserViews) SignInCode(ctx context.Context, t uow.Tx, hash string) (string, bool, error) {
	var email string
	found, err := queryRow(ctx, t, `SELECT email FROM signin_codes WHERE code_hash = $1`, []any{hash}, &email)
	return email, found, err
}

// EmailChangeCode returns the user who was sent the unused confirmation
// code with hash.
func (UserViews) EmailChangeCode(ctx context.Context, t uow.Tx, hash string) (uuid.UUID, bool, error) {
	var id uuid.UUID
	found, err := queryRow(ctx, t, `SELECT user_id FROM email_change_codes WHERE code_hash = $1`, []any{hash}, &id)
	return id, found, err
}

// UndoCode returns the undo code with hash.
func (UserViews) UndoCode(ctx context.Context, t uow.Tx, hash string) (user.UndoCodeRow, bool, error) {
	c := user.UndoCodeRow{CodeHash: hash}
	found, err := queryRow(ctx, t, `SELECT user_id, version, expires_at FROM email_undo_codes WHERE code_hash = $1`,
		[]any{hash}, &c.UserID, &c.Version, &c.ExpiresAt)
	c.ExpiresAt = c.ExpiresAt.UTC()
	return c, found, err
}

// selectSessions reads sessions with their last uses; a WHERE follows.
const selectSessions = `
SELECT s.token_hash, s.user_id, s.id, s.started_at, s.expires_at, s.client, coalesce(l.used_at, s.started_at)
  FROM sessions s LEFT JOIN session_uses l USING (token_hash)`

// Session returns the session with the token hash, with its last use.
func (UserViews) Session(ctx context.Context, t uow.Tx, hash string) (user.SessionRow, bool, error) {
	var r user.SessionRow
	found, err := queryRow(ctx, t, selectSessions+` WHERE s.token_hash = $1`, []any{hash}, sessionFields(&r)...)
	return utcSession(r), found, err
}

// Sessions returns every session of the user with id, with their last uses.
func (UserViews) Sessions(ctx context.Context, t uow.Tx, id uuid.UUID) ([]user.SessionRow, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("user views: sessions: %w", err)
	}
	rows, err := ptx.Query(ctx, selectSessions+` WHERE s.user_id = $1 ORDER BY s.started_at`, id)
	if err != nil {
		return nil, fmt.Errorf("user views: sessions: %w", err)
	}
	var r user.SessionRow
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (user.SessionRow, error) {
		err := row.Scan(sessionFields(&r)...)
		return utcSession(r), err
	})
	if err != nil {
		return nil, fmt.Errorf("user views: sessions: %w", err)
	}
	return list, nil
}

func sessionFields(r *user.SessionRow) []any {
	return []any{&r.TokenHash, &r.UserID, &r.ID, &r.StartedAt, &r.ExpiresAt, &r.Client, &r.LastUsedAt}
}

func utcSession(r user.SessionRow) user.SessionRow {
	r.StartedAt, r.ExpiresAt, r.LastUsedAt = r.StartedAt.UTC(), r.ExpiresAt.UTC(), r.LastUsedAt.UTC()
	return r
}

// queryRow scans the one row of q into dest and reports whether there was one.
func queryRow(ctx context.Context, t uow.Tx, q string, args []any, dest ...any) (bool, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return false, fmt.Errorf("user views: %w", err)
	}
	err = ptx.QueryRow(ctx, q, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("user views: %w", err)
	}
	return true, nil
}
