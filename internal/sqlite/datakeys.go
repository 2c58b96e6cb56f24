package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
)

// DataKeys is the keyring's store of wrapped data keys on SQLite
// ([keyring.Store]), in the table data_keys. It works in the transaction of
// the unit of work it is given.
type DataKeys struct{}

var _ keyring.Store = DataKeys{}

// Key returns the wrapped key id of subject, as [keyring.Store] describes.
func (DataKeys) Key(ctx context.Context, t uow.Tx, subject, id string) (keyring.WrappedKey, bool, error) {
	st, err := asTx(t)
	if err != nil {
		return keyring.WrappedKey{}, false, fmt.Errorf("data keys: %w", err)
	}
	k := keyring.WrappedKey{Subject: subject, ID: id}
	err = st.QueryRowContext(ctx, `SELECT master_id, wrapped FROM data_keys WHERE subject = ? AND id = ?`, subject, id).Scan(&k.Master, &k.Wrapped)
	if errors.Is(err, sql.ErrNoRows) {
		return keyring.WrappedKey{}, false, nil
	}
	if err != nil {
		return keyring.WrappedKey{}, false, fmt.Errorf("data keys: key %s of %s: %w", id, subject, err)
	}
	return k, true, nil
}

// AddKey stores a new key, as [keyring.Store] describes.
func (DataKeys) AddKey(ctx context.Context, t uow.Tx, k keyring.WrappedKey, expires time.Time) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	var exp sql.NullInt64
	if !expires.IsZero() {
		exp = sql.NullInt64{Int64: micros(expires), Valid: true}
	}
	if _, err := st.ExecContext(ctx, `INSERT INTO data_keys (subject, id, master_id, wrapped, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		k.Subject, k.ID, k.Master, k.Wrapped, micros(t.Now()), exp); err != nil {
		return fmt.Errorf("data keys: add key %s of %s: %w", k.ID, k.Subject, err)
	}
	return nil
}

// KeepKey stores k unless its subject has a key of its ID, and returns the
// one it has, as [keyring.Store] describes; SQLite's writers take turns,
// so the first to insert wins.
func (DataKeys) KeepKey(ctx context.Context, t uow.Tx, k keyring.WrappedKey) (keyring.WrappedKey, error) {
	st, err := asTx(t)
	if err != nil {
		return keyring.WrappedKey{}, fmt.Errorf("data keys: %w", err)
	}
	if err := st.writing(); err != nil {
		return keyring.WrappedKey{}, fmt.Errorf("data keys: %w", err)
	}
	kept := keyring.WrappedKey{Subject: k.Subject, ID: k.ID}
	err = st.QueryRowContext(ctx, `INSERT INTO data_keys (subject, id, master_id, wrapped, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (subject, id) DO UPDATE SET subject = excluded.subject
RETURNING master_id, wrapped`, k.Subject, k.ID, k.Master, k.Wrapped, micros(t.Now())).Scan(&kept.Master, &kept.Wrapped)
	if err != nil {
		return keyring.WrappedKey{}, fmt.Errorf("data keys: keep key %s of %s: %w", k.ID, k.Subject, err)
	}
	return kept, nil
}

// DeleteKeys deletes every key of subject, as [keyring.Store] describes.
func (DataKeys) DeleteKeys(ctx context.Context, t uow.Tx, subject string) (bool, error) {
	st, err := asTx(t)
	if err != nil {
		return false, fmt.Errorf("data keys: %w", err)
	}
	res, err := st.ExecContext(ctx, `DELETE FROM data_keys WHERE subject = ?`, subject)
	if err != nil {
		return false, fmt.Errorf("data keys: delete keys of %s: %w", subject, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("data keys: delete keys of %s: %w", subject, err)
	}
	return n > 0, nil
}

// ExpiredSubjects returns the subjects of prefix whose every key has
// expired, as [keyring.Store] describes, scanning the primary key from
// prefix on.
func (DataKeys) ExpiredSubjects(ctx context.Context, t uow.Tx, prefix, after string, now time.Time, limit int) ([]string, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, fmt.Errorf("data keys: %w", err)
	}
	rows, err := st.QueryContext(ctx, `SELECT subject FROM data_keys
WHERE subject >= ?1 AND (?2 = '' OR subject < ?2) AND subject > ?3
GROUP BY subject
HAVING max(expires_at) <= ?4 AND count(*) = count(expires_at)
ORDER BY subject LIMIT ?5`, prefix, keyring.PrefixEnd(prefix), after, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("data keys: expired subjects: %w", err)
	}
	defer rows.Close()
	var subjects []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("data keys: expired subjects: %w", err)
		}
		subjects = append(subjects, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("data keys: expired subjects: %w", err)
	}
	return subjects, nil
}

// KeysNotWrappedBy returns keys that another master key wrapped, as
// [keyring.Store] describes.
func (DataKeys) KeysNotWrappedBy(ctx context.Context, t uow.Tx, master string, limit int) ([]keyring.WrappedKey, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, fmt.Errorf("data keys: %w", err)
	}
	rows, err := st.QueryContext(ctx, `SELECT subject, id, master_id, wrapped FROM data_keys
WHERE master_id <> ? ORDER BY subject, id LIMIT ?`, master, limit)
	if err != nil {
		return nil, fmt.Errorf("data keys: keys to rewrap: %w", err)
	}
	defer rows.Close()
	var keys []keyring.WrappedKey
	for rows.Next() {
		var k keyring.WrappedKey
		if err := rows.Scan(&k.Subject, &k.ID, &k.Master, &k.Wrapped); err != nil {
			return nil, fmt.Errorf("data keys: keys to rewrap: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("data keys: keys to rewrap: %w", err)
	}
	return keys, nil
}

// Rewrap replaces a key wrapped by k.Master with one wrapped by to, as
// [keyring.Store] describes.
func (DataKeys) Rewrap(ctx context.Context, t uow.Tx, k keyring.WrappedKey, to string, wrapped []byte) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	if _, err := st.ExecContext(ctx, `UPDATE data_keys SET master_id = ?, wrapped = ? WHERE subject = ? AND id = ? AND master_id = ?`,
		to, wrapped, k.Subject, k.ID, k.Master); err != nil {
		return fmt.Errorf("data keys: rewrap key %s of %s: %w", k.ID, k.Subject, err)
	}
	return nil
}

// KeyWrappedBy returns a key that master wrapped, as [keyring.Store]
// describes; it scans data_keys until it finds one.
func (DataKeys) KeyWrappedBy(ctx context.Context, t uow.Tx, master string) (keyring.WrappedKey, bool, error) {
	st, err := asTx(t)
	if err != nil {
		return keyring.WrappedKey{}, false, fmt.Errorf("data keys: %w", err)
	}
	k := keyring.WrappedKey{Master: master}
	err = st.QueryRowContext(ctx, `SELECT subject, id, wrapped FROM data_keys WHERE master_id = ? LIMIT 1`, master).Scan(&k.Subject, &k.ID, &k.Wrapped)
	if errors.Is(err, sql.ErrNoRows) {
		return keyring.WrappedKey{}, false, nil
	}
	if err != nil {
		return keyring.WrappedKey{}, false, fmt.Errorf("data keys: a key wrapped by %s: %w", master, err)
	}
	return k, true, nil
}

// Masters returns the records of the master keys, as [keyring.Store]
// describes, from the table data_key_masters.
func (DataKeys) Masters(ctx context.Context, t uow.Tx) ([]keyring.MasterCheck, error) {
	st, err := asTx(t)
	if err != nil {
		return nil, fmt.Errorf("data keys: %w", err)
	}
	rows, err := st.QueryContext(ctx, `SELECT master_id, check_value FROM data_key_masters ORDER BY master_id`)
	if err != nil {
		return nil, fmt.Errorf("data keys: master keys: %w", err)
	}
	defer rows.Close()
	var masters []keyring.MasterCheck
	for rows.Next() {
		var m keyring.MasterCheck
		if err := rows.Scan(&m.Master, &m.Check); err != nil {
			return nil, fmt.Errorf("data keys: master keys: %w", err)
		}
		masters = append(masters, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("data keys: master keys: %w", err)
	}
	return masters, nil
}

// PutMaster records a master key, as [keyring.Store] describes.
func (DataKeys) PutMaster(ctx context.Context, t uow.Tx, m keyring.MasterCheck) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	if err := st.writing(); err != nil {
		return fmt.Errorf("data keys: record master key %s: %w", m.Master, err)
	}
	if _, err := st.ExecContext(ctx, `INSERT INTO data_key_masters (master_id, check_value) VALUES (?, ?)
ON CONFLICT (master_id) DO UPDATE SET check_value = excluded.check_value`, m.Master, m.Check); err != nil {
		return fmt.Errorf("data keys: record master key %s: %w", m.Master, err)
	}
	return nil
}

// DeleteMaster deletes the record of a master key, as [keyring.Store]
// describes.
func (DataKeys) DeleteMaster(ctx context.Context, t uow.Tx, master string) error {
	st, err := asTx(t)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	if err := st.writing(); err != nil {
		return fmt.Errorf("data keys: delete master key %s: %w", master, err)
	}
	if _, err := st.ExecContext(ctx, `DELETE FROM data_key_masters WHERE master_id = ?`, master); err != nil {
		return fmt.Errorf("data keys: delete master key %s: %w", master, err)
	}
	return nil
}
