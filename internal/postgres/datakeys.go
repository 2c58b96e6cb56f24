package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
)

// DataKeys is the keyring's store of wrapped data keys on PostgreSQL
// ([keyring.Store]), in the table data_keys. It works in the transaction of
// the unit of work it is given.
type DataKeys struct{}

var _ keyring.Store = DataKeys{}

// Key returns the wrapped key id of subject, as [keyring.Store] describes.
// It reads in a unit of work of this backend's runner, or in the
// transaction of an event-log subscriber ([SQLTx]), where the activity
// projection opens addresses.
func (DataKeys) Key(ctx context.Context, t uow.Tx, subject, id string) (keyring.WrappedKey, bool, error) {
	const q = `SELECT master_id, wrapped FROM data_keys WHERE subject = $1 AND id = $2`
	var row pgx.Row
	if st, ok := t.(*sqlTx); ok && st != nil {
		row = st.QueryRowContext(ctx, q, subject, id)
	} else {
		ptx, err := PgxTx(t)
		if err != nil {
			return keyring.WrappedKey{}, false, fmt.Errorf("data keys: %w", err)
		}
		row = ptx.QueryRow(ctx, q, subject, id)
	}
	k := keyring.WrappedKey{Subject: subject, ID: id}
	err := row.Scan(&k.Master, &k.Wrapped)
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		return keyring.WrappedKey{}, false, nil
	}
	if err != nil {
		return keyring.WrappedKey{}, false, fmt.Errorf("data keys: key %s of %s: %w", id, subject, err)
	}
	return k, true, nil
}

// AddKey stores a new key, as [keyring.Store] describes. The insert goes
// to the server with the unit of work's next statement or its commit, in
// no round trip of its own.
func (DataKeys) AddKey(ctx context.Context, t uow.Tx, k keyring.WrappedKey, expires time.Time) error {
	pt, err := asTx(t)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	return pt.later(ctx, `INSERT INTO data_keys (subject, id, master_id, wrapped, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		[]any{k.Subject, k.ID, k.Master, k.Wrapped, t.Now(), nullTime(expires)},
		func(err error) error { return fmt.Errorf("data keys: add key %s of %s: %w", k.ID, k.Subject, err) })
}

// KeepKey stores k unless its subject has a key of its ID, and returns the
// one it has, as [keyring.Store] describes. The upsert waits for a
// concurrent insert of the same key and then returns the row that won.
func (DataKeys) KeepKey(ctx context.Context, t uow.Tx, k keyring.WrappedKey) (keyring.WrappedKey, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return keyring.WrappedKey{}, fmt.Errorf("data keys: %w", err)
	}
	kept := keyring.WrappedKey{Subject: k.Subject, ID: k.ID}
	err = ptx.QueryRow(ctx, `INSERT INTO data_keys (subject, id, master_id, wrapped, created_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (subject, id) DO UPDATE SET subject = excluded.subject
RETURNING master_id, wrapped`, k.Subject, k.ID, k.Master, k.Wrapped, t.Now()).Scan(&kept.Master, &kept.Wrapped)
	if err != nil {
		return keyring.WrappedKey{}, fmt.Errorf("data keys: keep key %s of %s: %w", k.ID, k.Subject, err)
	}
	return kept, nil
}

// DeleteKeys deletes every key of subject, as [keyring.Store] describes.
func (DataKeys) DeleteKeys(ctx context.Context, t uow.Tx, subject string) (bool, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return false, fmt.Errorf("data keys: %w", err)
	}
	tag, err := ptx.Exec(ctx, `DELETE FROM data_keys WHERE subject = $1`, subject)
	if err != nil {
		return false, fmt.Errorf("data keys: delete keys of %s: %w", subject, err)
	}
	return tag.RowsAffected() > 0, nil
}

// ExpiredSubjects returns the subjects of prefix whose every key has
// expired, as [keyring.Store] describes, scanning the primary key from
// prefix on.
func (DataKeys) ExpiredSubjects(ctx context.Context, t uow.Tx, prefix, after string, now time.Time, limit int) ([]string, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("data keys: %w", err)
	}
	rows, err := ptx.Query(ctx, `SELECT subject FROM data_keys
WHERE subject >= $1 AND ($2 = '' OR subject < $2) AND subject > $3
GROUP BY subject
HAVING max(expires_at) <= $4 AND count(*) = count(expires_at)
ORDER BY subject LIMIT $5`, prefix, keyring.PrefixEnd(prefix), after, now, limit)
	if err != nil {
		return nil, fmt.Errorf("data keys: expired subjects: %w", err)
	}
	subjects, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("data keys: expired subjects: %w", err)
	}
	return subjects, nil
}

// KeysNotWrappedBy returns keys that another master key wrapped, as
// [keyring.Store] describes.
func (DataKeys) KeysNotWrappedBy(ctx context.Context, t uow.Tx, master string, limit int) ([]keyring.WrappedKey, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("data keys: %w", err)
	}
	rows, err := ptx.Query(ctx, `SELECT subject, id, master_id, wrapped FROM data_keys
WHERE master_id <> $1 ORDER BY subject, id LIMIT $2`, master, limit)
	if err != nil {
		return nil, fmt.Errorf("data keys: keys to rewrap: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyring.WrappedKey, error) {
		var k keyring.WrappedKey
		err := r.Scan(&k.Subject, &k.ID, &k.Master, &k.Wrapped)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("data keys: keys to rewrap: %w", err)
	}
	return keys, nil
}

// Rewrap replaces a key wrapped by k.Master with one wrapped by to, as
// [keyring.Store] describes.
func (DataKeys) Rewrap(ctx context.Context, t uow.Tx, k keyring.WrappedKey, to string, wrapped []byte) error {
	ptx, err := PgxTx(t)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	if _, err := ptx.Exec(ctx, `UPDATE data_keys SET master_id = $4, wrapped = $5 WHERE subject = $1 AND id = $2 AND master_id = $3`,
		k.Subject, k.ID, k.Master, to, wrapped); err != nil {
		return fmt.Errorf("data keys: rewrap key %s of %s: %w", k.ID, k.Subject, err)
	}
	return nil
}

// nullTime is t, or NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// KeyWrappedBy returns a key that master wrapped, as [keyring.Store]
// describes; it scans data_keys until it finds one.
func (DataKeys) KeyWrappedBy(ctx context.Context, t uow.Tx, master string) (keyring.WrappedKey, bool, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return keyring.WrappedKey{}, false, fmt.Errorf("data keys: %w", err)
	}
	k := keyring.WrappedKey{Master: master}
	err = ptx.QueryRow(ctx, `SELECT subject, id, wrapped FROM data_keys WHERE master_id = $1 LIMIT 1`, master).Scan(&k.Subject, &k.ID, &k.Wrapped)
	if errors.Is(err, pgx.ErrNoRows) {
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
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("data keys: %w", err)
	}
	rows, err := ptx.Query(ctx, `SELECT master_id, check_value FROM data_key_masters ORDER BY master_id`)
	if err != nil {
		return nil, fmt.Errorf("data keys: master keys: %w", err)
	}
	masters, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyring.MasterCheck, error) {
		var m keyring.MasterCheck
		err := r.Scan(&m.Master, &m.Check)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("data keys: master keys: %w", err)
	}
	return masters, nil
}

// PutMaster records a master key, as [keyring.Store] describes.
func (DataKeys) PutMaster(ctx context.Context, t uow.Tx, m keyring.MasterCheck) error {
	ptx, err := PgxTx(t)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	if _, err := ptx.Exec(ctx, `INSERT INTO data_key_masters (master_id, check_value) VALUES ($1, $2)
ON CONFLICT (master_id) DO UPDATE SET check_value = excluded.check_value`, m.Master, m.Check); err != nil {
		return fmt.Errorf("data keys: record master key %s: %w", m.Master, err)
	}
	return nil
}

// DeleteMaster deletes the record of a master key, as [keyring.Store]
// describes.
func (DataKeys) DeleteMaster(ctx context.Context, t uow.Tx, master string) error {
	ptx, err := PgxTx(t)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	if _, err := ptx.Exec(ctx, `DELETE FROM data_key_masters WHERE master_id = $1`, master); err != nil {
		return fmt.Errorf("data keys: delete master key %s: %w", master, err)
	}
	return nil
}
