package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// UserViews are the user domain's inline projections ([user.Views]) on
// PostgreSQL. Each event also clears what it makes stale (expired codes and
// sessions of the same address or user), so the tables stay small and a
// rebuild from the events produces exactly the same rows.
type UserViews struct{}

var _ user.Views = UserViews{}

// uniqueViolation is PostgreSQL's SQLSTATE for a duplicate key.
const uniqueViolation = "23505"

// Apply updates the projections with events appended in t.
func (UserViews) Apply(ctx context.Context, t uow.Tx, events ...eventstore.Event) error {
	ptx, err := PgxTx(t)
	if err != nil {
		return fmt.Errorf("user views: %w", err)
	}
	for _, e := range events {
		if err := applyUserEvent(ctx, ptx, e); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation && pgErr.ConstraintName == "users_email_key" {
				return fmt.Errorf("user views: apply %s: %w", e.Type, user.ErrEmailTaken)
			}
			return fmt.Errorf("user views: apply %s %s: %w", e.Type, e.ID, err)
		}
	}
	return nil
}

func applyUserEvent(ctx context.Context, tx pgx.Tx, e eventstore.Event) error {
	var err error
	switch e.Type {
	case user.TypeSignInLinkRequested:
		var d user.SignInLinkRequested
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
WITH stale AS (DELETE FROM signin_codes WHERE email = $2 AND expires_at <= $4)
INSERT INTO signin_codes (code_hash, email, expires_at) VALUES ($1, $2, $3)`,
			d.CodeHash, d.Email, d.ExpiresAt, e.RecordedAt)
	case user.TypeSignInLinkUsed:
		var d user.SignInLinkUsed
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM signin_codes WHERE code_hash = $1`, d.CodeHash)
	case user.TypeRegistered:
		var d user.Registered
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO users (id, email, created_at) VALUES ($1, $2, $3)`,
			d.UserID, d.Email, e.RecordedAt)
	case user.TypeSessionStarted:
		var d user.SessionStarted
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
WITH stale AS (DELETE FROM sessions WHERE user_id = $2 AND expires_at <= $4)
INSERT INTO sessions (token_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
			d.TokenHash, d.UserID, d.ExpiresAt, e.RecordedAt)
	case user.TypeSessionEnded:
		var d user.SessionEnded
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM sessions WHERE token_hash = $1`, d.TokenHash)
	case user.TypeEmailChangeRequested:
		var d user.EmailChangeRequested
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
WITH stale AS (DELETE FROM email_change_codes WHERE user_id = $2 AND expires_at <= $4)
INSERT INTO email_change_codes (code_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
			d.CodeHash, d.UserID, d.ExpiresAt, e.RecordedAt)
	case user.TypeEmailChanged:
		var d user.EmailChanged
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
WITH used AS (DELETE FROM email_change_codes WHERE code_hash = $3)
UPDATE users SET email = $2 WHERE id = $1`, d.UserID, d.NewEmail, d.CodeHash)
	}
	return err
}

// Reset empties the projections as part of t, for a rebuild. TRUNCATE locks
// the tables until t ends, so commands wait for the rebuild instead of
// writing into half-built tables, and the address constraint is deferred to
// the commit, when the rebuilt state must satisfy it.
func (UserViews) Reset(ctx context.Context, t uow.Tx) error {
	ptx, err := PgxTx(t)
	if err != nil {
		return fmt.Errorf("user views: reset: %w", err)
	}
	_, err = ptx.Exec(ctx, `
TRUNCATE users, sessions, signin_codes, email_change_codes;
SET CONSTRAINTS users_email_key DEFERRED`)
	if err != nil {
		return fmt.Errorf("user views: reset: %w", err)
	}
	return nil
}

func (UserViews) UserByEmail(ctx context.Context, t uow.Tx, email string) (user.User, bool, error) {
	return queryUser(ctx, t, `SELECT id, email, created_at FROM users WHERE email = $1`, email)
}

func (UserViews) User(ctx context.Context, t uow.Tx, id uuid.UUID) (user.User, bool, error) {
	return queryUser(ctx, t, `SELECT id, email, created_at FROM users WHERE id = $1`, id)
}

func queryUser(ctx context.Context, t uow.Tx, q string, arg any) (user.User, bool, error) {
	var u user.User
	found, err := queryRow(ctx, t, q, []any{arg}, &u.ID, &u.Email, &u.CreatedAt)
	u.CreatedAt = u.CreatedAt.UTC()
	return u, found, err
}

func (UserViews) SignInCode(ctx context.Context, t uow.Tx, hash string) (string, bool, error) {
	var email string
	found, err := queryRow(ctx, t, `SELECT email FROM signin_codes WHERE code_hash = $1`, []any{hash}, &email)
	return email, found, err
}

func (UserViews) EmailChangeCode(ctx context.Context, t uow.Tx, hash string) (uuid.UUID, bool, error) {
	var id uuid.UUID
	found, err := queryRow(ctx, t, `SELECT user_id FROM email_change_codes WHERE code_hash = $1`, []any{hash}, &id)
	return id, found, err
}

func (UserViews) Session(ctx context.Context, t uow.Tx, hash string) (uuid.UUID, time.Time, bool, error) {
	var id uuid.UUID
	var expires time.Time
	found, err := queryRow(ctx, t, `SELECT user_id, expires_at FROM sessions WHERE token_hash = $1`, []any{hash}, &id, &expires)
	return id, expires.UTC(), found, err
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
