package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// UserViews are the tables of the user domain's inline read models on
// SQLite ([user.Views]), with the meaning of the PostgreSQL backend's;
// [user.ViewsProjection] decides what each event does to them. The rows of
// expired codes and sessions stay until a sweep ([UserViews.Sweep]) deletes
// them, so a rebuild from the events produces exactly the same rows as the
// live views once both are swept as of the same time. They work in the
// transaction of the unit of work they are given.
type UserViews struct{}

var _ user.Views = UserViews{}

// isEmailTaken reports whether err is a violation of the unique index
// users_email_key. SQLite names the columns of a violated unique index,
// not the index, and the index on users (email) is the only one there.
func isEmailTaken(err error) bool {
	return isConstraint(err, sqlite3.SQLITE_CONSTRAINT_UNIQUE) &&
		strings.Contains(err.Error(), "UNIQUE constraint failed: users.email")
}

// PutUser adds u, as [user.Views] describes.
func (UserViews) PutUser(ctx context.Context, t uow.Tx, u user.User) error {
	return writeViews(ctx, t, "put user", `INSERT INTO users (id, email, created_at) VALUES (?, ?, ?)`,
		u.ID, u.Email, micros(u.CreatedAt))
}

// SetEmail moves the user with id to email, as [user.Views] describes.
func (UserViews) SetEmail(ctx context.Context, t uow.Tx, id uuid.UUID, email string) error {
	return writeViews(ctx, t, "set email", `UPDATE users SET email = ? WHERE id = ?`, email, id)
}

// DeleteUser deletes the user with id and the rows that are theirs, as
// [user.Views] describes: the sign-in codes of their address first, while
// the user's row still says which address that is.
func (UserViews) DeleteUser(ctx context.Context, t uow.Tx, id uuid.UUID) error {
	s := id.String()
	for _, q := range []string{
		`DELETE FROM signin_codes WHERE email = (SELECT email FROM users WHERE id = ?)`,
		`DELETE FROM session_uses WHERE token_hash IN (SELECT token_hash FROM sessions WHERE user_id = ?)`,
		`DELETE FROM sessions WHERE user_id = ?`,
		`DELETE FROM email_change_codes WHERE user_id = ?`,
		`DELETE FROM email_undo_codes WHERE user_id = ?`,
		`DELETE FROM users WHERE id = ?`,
	} {
		if err := writeViews(ctx, t, "delete user", q, s); err != nil {
			return err
		}
	}
	return nil
}

// PutSession adds a session.
func (UserViews) PutSession(ctx context.Context, t uow.Tx, s user.SessionRow) error {
	return writeViews(ctx, t, "put session", `
INSERT INTO sessions (token_hash, user_id, id, started_at, expires_at, client) VALUES (?, ?, ?, ?, ?, ?)`,
		s.TokenHash, s.UserID, s.ID, micros(s.StartedAt), micros(s.ExpiresAt), s.Client)
}

// DeleteSession deletes the session with the token hash and its last use.
func (UserViews) DeleteSession(ctx context.Context, t uow.Tx, tokenHash string) error {
	if err := writeViews(ctx, t, "delete session", `DELETE FROM session_uses WHERE token_hash = ?`, tokenHash); err != nil {
		return err
	}
	return writeViews(ctx, t, "delete session", `DELETE FROM sessions WHERE token_hash = ?`, tokenHash)
}

// TouchSession records a use of the session with the token hash, as
// [user.Views] describes.
func (UserViews) TouchSession(ctx context.Context, t uow.Tx, tokenHash string, at time.Time) error {
	return writeViews(ctx, t, "touch session", `
INSERT INTO session_uses (token_hash, used_at) VALUES (?, ?)
ON CONFLICT (token_hash) DO UPDATE SET used_at = excluded.used_at WHERE session_uses.used_at < excluded.used_at`,
		tokenHash, micros(at))
}

// PutSignInCode adds a sign-in code.
func (UserViews) PutSignInCode(ctx context.Context, t uow.Tx, c user.SignInCodeRow) error {
	return writeViews(ctx, t, "put sign-in code", `INSERT INTO signin_codes (code_hash, email, expires_at) VALUES (?, ?, ?)`,
		c.CodeHash, c.Email, micros(c.ExpiresAt))
}

// DeleteSignInCode deletes the sign-in code with hash.
func (UserViews) DeleteSignInCode(ctx context.Context, t uow.Tx, codeHash string) error {
	return writeViews(ctx, t, "delete sign-in code", `DELETE FROM signin_codes WHERE code_hash = ?`, codeHash)
}

// PutChangeCode adds a confirmation code.
func (UserViews) PutChangeCode(ctx context.Context, t uow.Tx, c user.ChangeCodeRow) error {
	return writeViews(ctx, t, "put change code", `INSERT INTO email_change_codes (code_hash, user_id, expires_at) VALUES (?, ?, ?)`,
		c.CodeHash, c.UserID, micros(c.ExpiresAt))
}

// DeleteChangeCode deletes the confirmation code with hash.
func (UserViews) DeleteChangeCode(ctx context.Context, t uow.Tx, codeHash string) error {
	return writeViews(ctx, t, "delete change code", `DELETE FROM email_change_codes WHERE code_hash = ?`, codeHash)
}

// PutUndoCode adds the code that undoes a change of address.
func (UserViews) PutUndoCode(ctx context.Context, t uow.Tx, c user.UndoCodeRow) error {
	return writeViews(ctx, t, "put undo code", `INSERT INTO email_undo_codes (code_hash, user_id, version, expires_at) VALUES (?, ?, ?, ?)`,
		c.CodeHash, c.UserID, c.Version, micros(c.ExpiresAt))
}

// DeleteUndoCode deletes the undo code with hash.
func (UserViews) DeleteUndoCode(ctx context.Context, t uow.Tx, codeHash string) error {
	return writeViews(ctx, t, "delete undo code", `DELETE FROM email_undo_codes WHERE code_hash = ?`, codeHash)
}

// writeViews runs a write of the views; an address given to two users is an
// error wrapping [user.ErrEmailTaken].
func writeViews(ctx context.Context, t uow.Tx, op, q string, args ...any) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("user views: %s: %w", op, err)
	}
	if _, err := st.ExecContext(ctx, q, args...); err != nil {
		if isEmailTaken(err) {
			return fmt.Errorf("user views: %s: %w", op, user.ErrEmailTaken)
		}
		return fmt.Errorf("user views: %s: %w", op, err)
	}
	return nil
}

// Reset empties the views as part of t, for a rebuild. The unit of
// work holds the database's write lock, so commands wait for the rebuild
// instead of writing into half-built tables. The log's order is exact commit
// order on SQLite, so the replay passes only through states the live
// projections had, and the unique address needs no deferral.
func (UserViews) Reset(ctx context.Context, t uow.Tx) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("user views: reset: %w", err)
	}
	for _, table := range []string{"users", "sessions", "signin_codes", "email_change_codes", "email_undo_codes"} {
		if _, err := st.ExecContext(ctx, `DELETE FROM `+table); err != nil {
			return fmt.Errorf("user views: reset %s: %w", table, err)
		}
	}
	return nil
}

// Sweep deletes up to limit rows of each table whose link or session
// expired at or before now, as [user.Views] describes, and returns how
// many it deleted.
func (UserViews) Sweep(ctx context.Context, t uow.Tx, now time.Time, limit int) (int64, error) {
	st, err := asTx(t)
	if err != nil {
		return 0, fmt.Errorf("user views: sweep: %w", err)
	}
	var n int64
	for _, table := range []struct{ name, key string }{
		{"sessions", "token_hash"}, {"signin_codes", "code_hash"}, {"email_change_codes", "code_hash"},
		{"email_undo_codes", "code_hash"},
	} {
		res, err := st.ExecContext(ctx, `DELETE FROM `+table.name+` WHERE `+table.key+` IN
(SELECT `+table.key+` FROM `+table.name+` WHERE expires_at <= ? LIMIT ?)`, micros(now), limit)
		if err != nil {
			return n, fmt.Errorf("user views: sweep %s: %w", table.name, err)
		}
		deleted, err := res.RowsAffected()
		if err != nil {
			return n, fmt.Errorf("user views: sweep %s: %w", table.name, err)
		}
		n += deleted
	}
	// The last uses of sessions gone, by this sweep or before.
	_, err = st.ExecContext(ctx, `DELETE FROM session_uses WHERE token_hash IN
(SELECT token_hash FROM session_uses l WHERE NOT EXISTS
    (SELECT 1 FROM sessions s WHERE s.token_hash = l.token_hash) LIMIT ?)`, limit)
	if err != nil {
		return n, fmt.Errorf("user views: sweep session_uses: %w", err)
	}
	return n, nil
}

// UserByEmail returns the user who holds email, as [user.Views] describes.
func (UserViews) UserByEmail(ctx context.Context, t uow.Tx, email string) (user.User, bool, error) {
	return queryUser(ctx, t, `SELECT id, email, created_at FROM users WHERE email = ?`, email)
}

// User returns the user with id.
func (UserViews) User(ctx context.Context, t uow.Tx, id uuid.UUID) (user.User, bool, error) {
	return queryUser(ctx, t, `SELECT id, email, created_at FROM users WHERE id = ?`, id)
}

func queryUser(ctx context.Context, t uow.Tx, q string, arg any) (user.User, bool, error) {
	var u user.User
	var created int64
	found, err := queryRow(ctx, t, q, []any{arg}, &u.ID, &u.Email, &created)
	if found {
		u.CreatedAt = fromMicros(created)
	}
	return u, found, err
}

// SignInCode returns the address the unused sign-in code with hash was sent to.
func (UserViews) SignInCode(ctx context.Context, t uow.Tx, hash string) (string, bool, error) {
	var email string
	found, err := queryRow(ctx, t, `SELECT email FROM signin_codes WHERE code_hash = ?`, []any{hash}, &email)
	return email, found, err
}

// EmailChangeCode returns the user who was sent the unused confirmation
// code with hash.
func (UserViews) EmailChangeCode(ctx context.Context, t uow.Tx, hash string) (uuid.UUID, bool, error) {
	var id uuid.UUID
	found, err := queryRow(ctx, t, `SELECT user_id FROM email_change_codes WHERE code_hash = ?`, []any{hash}, &id)
	return id, found, err
}

// UndoCode returns the undo code with hash.
func (UserViews) UndoCode(ctx context.Context, t uow.Tx, hash string) (user.UndoCodeRow, bool, error) {
	c := user.UndoCodeRow{CodeHash: hash}
	var expires int64
	found, err := queryRow(ctx, t, `SELECT user_id, version, expires_at FROM email_undo_codes WHERE code_hash = ?`,
		[]any{hash}, &c.UserID, &c.Version, &expires)
	c.ExpiresAt = fromMicros(expires)
	return c, found, err
}

// selectSessions reads sessions with their last uses; a WHERE follows.
const selectSessions = `
SELECT s.token_hash, s.user_id, s.id, s.started_at, s.expires_at, s.client, coalesce(l.used_at, s.started_at)
  FROM sessions s LEFT JOIN session_uses l USING (token_hash)`

// sessionScan scans a row of selectSessions.
type sessionScan struct {
	r                        user.SessionRow
	started, expires, usedAt int64
}

func (s *sessionScan) fields() []any {
	return []any{&s.r.TokenHash, &s.r.UserID, &s.r.ID, &s.started, &s.expires, &s.r.Client, &s.usedAt}
}

func (s *sessionScan) row() user.SessionRow {
	r := s.r
	r.StartedAt, r.ExpiresAt, r.LastUsedAt = fromMicros(s.started), fromMicros(s.expires), fromMicros(s.usedAt)
	return r
}

// Session returns the session with the token hash, with its last use.
func (UserViews) Session(ctx context.Context, t uow.Tx, hash string) (user.SessionRow, bool, error) {
	var s sessionScan
	found, err := queryRow(ctx, t, selectSessions+` WHERE s.token_hash = ?`, []any{hash}, s.fields()...)
	if !found {
		return user.SessionRow{}, found, err
	}
	return s.row(), found, err
}

// Sessions returns every session of the user with id, with their last uses.
func (UserViews) Sessions(ctx context.Context, t uow.Tx, id uuid.UUID) ([]user.SessionRow, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, fmt.Errorf("user views: sessions: %w", err)
	}
	rows, err := st.QueryContext(ctx, selectSessions+` WHERE s.user_id = ? ORDER BY s.started_at`, id)
	if err != nil {
		return nil, fmt.Errorf("user views: sessions: %w", err)
	}
	defer rows.Close()
	var list []user.SessionRow
	for rows.Next() {
		var s sessionScan
		if err := rows.Scan(s.fields()...); err != nil {
			return nil, fmt.Errorf("user views: sessions: %w", err)
		}
		list = append(list, s.row())
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("user views: sessions: %w", err)
	}
	return list, nil
}

// queryRow scans the one row of q into dest and reports whether there was one.
func queryRow(ctx context.Context, t uow.Tx, q string, args []any, dest ...any) (bool, error) {
	st, err := asTx(t)
	if err != nil {
		return false, fmt.Errorf("user views: %w", err)
	}
	err = st.QueryRowContext(ctx, q, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("user views: %w", err)
	}
	return true, nil
}
