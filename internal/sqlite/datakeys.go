package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
)

// DataKeys is the keyring's store of wrapped data keys on SQLite
// ([keyring.Store]), in the table data_keys. It works in the transaction of
// the unit of work it is given.
type DataKeys struct{}

var _ keyring.Store = DataKeys{}

// Key returns the wrapped key of subject, as [keyring.Store] describes.
func (DataKeys) Key(ctx context.Context, t uow.Tx, subject string) ([]byte, string, bool, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, "", false, fmt.Errorf("data keys: %w", err)
	}
	var wrapped []byte
	var master string
	err = st.QueryRowContext(ctx, `SELECT wrapped, master_id FROM data_keys WHERE subject = ?`, subject).Scan(&wrapped, &master)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("data keys: key of %s: %w", subject, err)
	}
	return wrapped, master, true, nil
}

// AddKey stores the key of subject unless it has one, and returns the one
// it has, as [keyring.Store] describes; SQLite's writers take turns, so
// the first to insert wins.
func (s DataKeys) AddKey(ctx context.Context, t uow.Tx, subject, master string, wrapped []byte) ([]byte, string, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, "", fmt.Errorf("data keys: %w", err)
	}
	if _, err := st.ExecContext(ctx, `INSERT INTO data_keys (subject, master_id, wrapped, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (subject) DO NOTHING`, subject, master, wrapped, micros(t.Now())); err != nil {
		return nil, "", fmt.Errorf("data keys: add key of %s: %w", subject, err)
	}
	got, m, ok, err := s.Key(ctx, t, subject)
	if err == nil && !ok {
		err = fmt.Errorf("data keys: add key of %s: no key after the insert", subject)
	}
	return got, m, err
}

// DeleteKey deletes the key of subject, as [keyring.Store] describes.
func (DataKeys) DeleteKey(ctx context.Context, t uow.Tx, subject string) (bool, error) {
	st, err := asTx(t)
	if err != nil {
		return false, fmt.Errorf("data keys: %w", err)
	}
	res, err := st.ExecContext(ctx, `DELETE FROM data_keys WHERE subject = ?`, subject)
	if err != nil {
		return false, fmt.Errorf("data keys: delete key of %s: %w", subject, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("data keys: delete key of %s: %w", subject, err)
	}
	return n > 0, nil
}

// KeysNotWrappedBy returns keys that another master key wrapped, as
// [keyring.Store] describes.
func (DataKeys) KeysNotWrappedBy(ctx context.Context, t uow.Tx, master string, limit int) ([]keyring.WrappedKey, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, fmt.Errorf("data keys: %w", err)
	}
	rows, err := st.QueryContext(ctx, `SELECT subject, master_id, wrapped FROM data_keys
WHERE master_id <> ? ORDER BY subject LIMIT ?`, master, limit)
	if err != nil {
		return nil, fmt.Errorf("data keys: keys to rewrap: %w", err)
	}
	defer rows.Close()
	var keys []keyring.WrappedKey
	for rows.Next() {
		var k keyring.WrappedKey
		if err := rows.Scan(&k.Subject, &k.Master, &k.Wrapped); err != nil {
			return nil, fmt.Errorf("data keys: keys to rewrap: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("data keys: keys to rewrap: %w", err)
	}
	return keys, nil
}

// Rewrap replaces a key wrapped by from with one wrapped by to, as
// [keyring.Store] describes.
func (DataKeys) Rewrap(ctx context.Context, t uow.Tx, subject, from, to string, wrapped []byte) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	if _, err := st.ExecContext(ctx, `UPDATE data_keys SET master_id = ?, wrapped = ? WHERE subject = ? AND master_id = ?`,
		to, wrapped, subject, from); err != nil {
		return fmt.Errorf("data keys: rewrap key of %s: %w", subject, err)
	}
	return nil
}
