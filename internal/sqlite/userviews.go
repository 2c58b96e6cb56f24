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

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// UserViews are the user domain's inline projections ([user.Views]) on
// SQLite, in the tables and with the meaning of the PostgreSQL backend's.
// The rows of expired codes and sessions stay until a sweep
// ([UserViews.Sweep]) deletes them, so a rebuild from the events produces
// exactly the same rows as the live views once both are swept as of the
// same time. They work in the transaction of the unit of work they are
// given.
//
// Keys opens the addresses of the events ([user.Address]). An event whose
// address is erased adds no row: its account, or its address's links, are
// gone.
type UserViews struct {
	user.ViewsProjection
	Keys *keyring.Keyring
}

var _ user.Views = UserViews{}

// Apply updates the projections with events appended in t. An event that
// would give one address to two users is an error wrapping
// [user.ErrEmailTaken], and changes nothing.
func (v UserViews) Apply(ctx context.Context, t uow.Tx, events ...eventstore.Event) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("user views: %w", err)
	}
	for _, e := range events {
		if err := v.apply(ctx, st, e); err != nil {
			if isEmailTaken(err) {
				return fmt.Errorf("user views: apply %s: %w", e.Type, user.ErrEmailTaken)
			}
			return fmt.Errorf("user views: apply %s %s: %w", e.Type, e.ID, err)
		}
	}
	return nil
}

// isEmailTaken reports whether err is a violation of the unique index
// users_email_key. SQLite names the columns of a violated unique index,
// not the index, and the index on users (email) is the only one there.
func isEmailTaken(err error) bool {
	return isConstraint(err, sqlite3.SQLITE_CONSTRAINT_UNIQUE) &&
		strings.Contains(err.Error(), "UNIQUE constraint failed: users.email")
}

// statement is one SQL statement with its arguments.
type statement struct {
	sql  string
	args []any
}

func (v UserViews) apply(ctx context.Context, st *tx, e eventstore.Event) error {
	stmts, err := v.statements(ctx, st, e)
	if err != nil {
		return err
	}
	// Where an event takes two statements, the one that can fail on the
	// data (the unique address) comes first, so that a failure changes
	// nothing.
	for _, s := range stmts {
		if _, err := st.ExecContext(ctx, s.sql, s.args...); err != nil {
			return err
		}
	}
	return nil
}

// statements returns the statements that apply e to the views, or none
// for an event the views do not follow or whose address is erased.
func (v UserViews) statements(ctx context.Context, st *tx, e eventstore.Event) ([]statement, error) {
	recorded := micros(e.RecordedAt)
	switch e.Type {
	case user.TypeSignInLinkRequested:
		d, err := eventstore.Decode[user.SignInLinkRequested](e)
		if err != nil {
			return nil, err
		}
		email, ok, err := user.Address(ctx, st, v.Keys, e, d.Email)
		if err != nil || !ok {
			return nil, err
		}
		return []statement{
			{`INSERT INTO signin_codes (code_hash, email, expires_at) VALUES (?, ?, ?)`,
				[]any{d.CodeHash, email, micros(d.ExpiresAt)}},
		}, nil
	case user.TypeSignInLinkUsed:
		d, err := eventstore.Decode[user.SignInLinkUsed](e)
		return []statement{{`DELETE FROM signin_codes WHERE code_hash = ?`, []any{d.CodeHash}}}, err
	case user.TypeRegistered:
		d, err := eventstore.Decode[user.Registered](e)
		if err != nil {
			return nil, err
		}
		email, ok, err := user.Address(ctx, st, v.Keys, e, d.Email)
		if err != nil || !ok {
			return nil, err
		}
		return []statement{{`INSERT INTO users (id, email, created_at) VALUES (?, ?, ?)`,
			[]any{d.UserID, email, recorded}}}, nil
	case user.TypeSessionStarted:
		d, err := eventstore.Decode[user.SessionStarted](e)
		return []statement{
			{`INSERT INTO sessions (token_hash, user_id, expires_at) VALUES (?, ?, ?)`,
				[]any{d.TokenHash, d.UserID, micros(d.ExpiresAt)}},
		}, err
	case user.TypeSessionEnded:
		d, err := eventstore.Decode[user.SessionEnded](e)
		return []statement{{`DELETE FROM sessions WHERE token_hash = ?`, []any{d.TokenHash}}}, err
	case user.TypeEmailChangeRequested:
		d, err := eventstore.Decode[user.EmailChangeRequested](e)
		return []statement{
			{`INSERT INTO email_change_codes (code_hash, user_id, expires_at) VALUES (?, ?, ?)`,
				[]any{d.CodeHash, d.UserID, micros(d.ExpiresAt)}},
		}, err
	case user.TypeEmailChanged:
		d, err := eventstore.Decode[user.EmailChanged](e)
		if err != nil {
			return nil, err
		}
		used := statement{`DELETE FROM email_change_codes WHERE code_hash = ?`, []any{d.CodeHash}}
		email, ok, err := user.Address(ctx, st, v.Keys, e, d.NewEmail)
		if err != nil || !ok {
			return []statement{used}, err
		}
		return []statement{{`UPDATE users SET email = ? WHERE id = ?`, []any{email, d.UserID}}, used}, nil
	case user.TypeErased:
		d, err := eventstore.Decode[user.Erased](e)
		id := d.UserID.String()
		return []statement{
			{`DELETE FROM signin_codes WHERE email = (SELECT email FROM users WHERE id = ?)`, []any{id}},
			{`DELETE FROM sessions WHERE user_id = ?`, []any{id}},
			{`DELETE FROM email_change_codes WHERE user_id = ?`, []any{id}},
			{`DELETE FROM users WHERE id = ?`, []any{id}},
		}, err
	}
	return nil, nil
}

// Reset empties the projections as part of t, for a rebuild. The unit of
// work holds the database's write lock, so commands wait for the rebuild
// instead of writing into half-built tables. The log's order is exact commit
// order on SQLite, so the replay passes only through states the live
// projections had, and the unique address needs no deferral.
func (UserViews) Reset(ctx context.Context, t uow.Tx) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("user views: reset: %w", err)
	}
	for _, table := range []string{"users", "sessions", "signin_codes", "email_change_codes"} {
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

// Session returns the user of the session with the token hash and when it
// expires.
func (UserViews) Session(ctx context.Context, t uow.Tx, hash string) (uuid.UUID, time.Time, bool, error) {
	var id uuid.UUID
	var expires int64
	found, err := queryRow(ctx, t, `SELECT user_id, expires_at FROM sessions WHERE token_hash = ?`, []any{hash}, &id, &expires)
	if !found {
		return id, time.Time{}, found, err
	}
	return id, fromMicros(expires), found, err
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
