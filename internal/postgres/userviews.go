package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// UserViews are the user domain's inline projections ([user.Views]) on
// PostgreSQL. The rows of expired codes and sessions stay until a sweep
// ([UserViews.Sweep]) deletes them, so a rebuild from the events produces
// exactly the same rows as the live views once both are swept as of the
// same time.
//
// Keys opens the addresses of the events ([user.Address]). An event whose
// address is erased adds no row: its account, or its address's links, are
// gone.
type UserViews struct {
	user.ViewsProjection
	Keys *keyring.Keyring
}

var _ user.Views = UserViews{}

// uniqueViolation is PostgreSQL's SQLSTATE for a duplicate key.
const uniqueViolation = "23505"

// Apply updates the projections with events appended in t.
//
// The statements of events that cannot give one address to two users go to
// the server with t's next statement or its commit, not in round trips of
// their own; an error of theirs is returned there, and t rolls back. Those
// of Registered and EmailChanged run at once, so that Apply itself returns
// [user.ErrEmailTaken], which commands act on.
func (v UserViews) Apply(ctx context.Context, t uow.Tx, events ...eventstore.Event) error {
	pt, err := asTx(t)
	if err != nil {
		return fmt.Errorf("user views: %w", err)
	}
	for _, e := range events {
		sql, args, err := v.statement(ctx, t, e)
		if err != nil {
			return applyError(e, err)
		}
		if sql == "" {
			continue
		}
		wrap := func(err error) error { return applyError(e, err) }
		if e.Type == user.TypeRegistered || e.Type == user.TypeEmailChanged {
			if _, err := pt.q.Exec(ctx, sql, args...); err != nil {
				return wrap(err)
			}
			continue
		}
		if err := pt.later(ctx, sql, args, wrap); err != nil {
			return err
		}
	}
	return nil
}

// applyError describes err, of applying e: an address given to two users
// wraps [user.ErrEmailTaken].
func applyError(e eventstore.Event, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation && pgErr.ConstraintName == "users_email_key" {
		return fmt.Errorf("user views: apply %s: %w", e.Type, user.ErrEmailTaken)
	}
	return fmt.Errorf("user views: apply %s %s: %w", e.Type, e.ID, err)
}

// statement returns the statement that applies e to the views, with its
// arguments, or no statement for an event the views do not follow or whose
// address is erased.
func (v UserViews) statement(ctx context.Context, t uow.Tx, e eventstore.Event) (string, []any, error) {
	switch e.Type {
	case user.TypeSignInLinkRequested:
		d, err := eventstore.Decode[user.SignInLinkRequested](e)
		if err != nil {
			return "", nil, err
		}
		email, ok, err := user.Address(ctx, t, v.Keys, e, d.Email)
		if err != nil || !ok {
			return "", nil, err
		}
		return `INSERT INTO signin_codes (code_hash, email, expires_at) VALUES ($1, $2, $3)`,
			[]any{d.CodeHash, email, d.ExpiresAt}, nil
	case user.TypeSignInLinkUsed:
		d, err := eventstore.Decode[user.SignInLinkUsed](e)
		return `DELETE FROM signin_codes WHERE code_hash = $1`, []any{d.CodeHash}, err
	case user.TypeRegistered:
		d, err := eventstore.Decode[user.Registered](e)
		if err != nil {
			return "", nil, err
		}
		email, ok, err := user.Address(ctx, t, v.Keys, e, d.Email)
		if err != nil || !ok {
			return "", nil, err
		}
		return `INSERT INTO users (id, email, created_at) VALUES ($1, $2, $3)`,
			[]any{d.UserID, email, e.RecordedAt}, nil
	case user.TypeSessionStarted:
		d, err := eventstore.Decode[user.SessionStarted](e)
		return `INSERT INTO sessions (token_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
			[]any{d.TokenHash, d.UserID, d.ExpiresAt}, err
	case user.TypeSessionEnded:
		d, err := eventstore.Decode[user.SessionEnded](e)
		return `DELETE FROM sessions WHERE token_hash = $1`, []any{d.TokenHash}, err
	case user.TypeEmailChangeRequested:
		d, err := eventstore.Decode[user.EmailChangeRequested](e)
		return `INSERT INTO email_change_codes (code_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
			[]any{d.CodeHash, d.UserID, d.ExpiresAt}, err
	case user.TypeEmailChanged:
		d, err := eventstore.Decode[user.EmailChanged](e)
		if err != nil {
			return "", nil, err
		}
		email, ok, err := user.Address(ctx, t, v.Keys, e, d.NewEmail)
		if err != nil {
			return "", nil, err
		}
		if !ok {
			return `DELETE FROM email_change_codes WHERE code_hash = $1`, []any{d.CodeHash}, nil
		}
		return `
WITH used AS (DELETE FROM email_change_codes WHERE code_hash = $3)
UPDATE users SET email = $2 WHERE id = $1`, []any{d.UserID, email, d.CodeHash}, nil
	case user.TypeErased:
		d, err := eventstore.Decode[user.Erased](e)
		return `
WITH gone AS (DELETE FROM users WHERE id = $1 RETURNING email),
     sessions AS (DELETE FROM sessions WHERE user_id = $1),
     changes AS (DELETE FROM email_change_codes WHERE user_id = $1)
DELETE FROM signin_codes WHERE email IN (SELECT email FROM gone)`, []any{d.UserID}, err
	}
	return "", nil, nil
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
        (SELECT code_hash FROM email_change_codes WHERE expires_at <= $1 LIMIT $2) RETURNING 1)
SELECT (SELECT count(*) FROM s) + (SELECT count(*) FROM c) + (SELECT count(*) FROM e)`, now, limit).Scan(&n)
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

// Session returns the user of the session with the token hash and when it
// expires.
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
