package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
)

// DataKeys is the keyring's store of wrapped data keys on PostgreSQL
// ([keyring.Store]), in the table data_keys. It works in the transaction of
// the unit of work it is given.
type DataKeys struct{}

var _ keyring.Store = DataKeys{}

// Key returns the wrapped key of subject, as [keyring.Store] describes.
func (DataKeys) Key(ctx context.Context, t uow.Tx, subject string) ([]byte, string, bool, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, "", false, fmt.Errorf("data keys: %w", err)
	}
	var wrapped []byte
	var master string
	err = ptx.QueryRow(ctx, `SELECT wrapped, master_id FROM data_keys WHERE subject = $1`, subject).Scan(&wrapped, &master)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("data keys: key of %s: %w", subject, err)
	}
	return wrapped, master, true, nil
}

// AddKey stores the key of subject unless it has one, and returns the one
// it has, as [keyring.Store] describes. The insert waits for a concurrent
// insert of the same subject and gives way to it; the select that follows
// is a statement of its own, so it sees the row that won.
func (s DataKeys) AddKey(ctx context.Context, t uow.Tx, subject, master string, wrapped []byte) ([]byte, string, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, "", fmt.Errorf("data keys: %w", err)
	}
	if _, err := ptx.Exec(ctx, `INSERT INTO data_keys (subject, master_id, wrapped, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (subject) DO NOTHING`, subject, master, wrapped, t.Now()); err != nil {
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
	ptx, err := PgxTx(t)
	if err != nil {
		return false, fmt.Errorf("data keys: %w", err)
	}
	tag, err := ptx.Exec(ctx, `DELETE FROM data_keys WHERE subject = $1`, subject)
	if err != nil {
		return false, fmt.Errorf("data keys: delete key of %s: %w", subject, err)
	}
	return tag.RowsAffected() > 0, nil
}

// KeysNotWrappedBy returns keys that another master key wrapped, as
// [keyring.Store] describes.
func (DataKeys) KeysNotWrappedBy(ctx context.Context, t uow.Tx, master string, limit int) ([]keyring.WrappedKey, error) {
	ptx, err := PgxTx(t)
	if err != nil {
		return nil, fmt.Errorf("data keys: %w", err)
	}
	rows, err := ptx.Query(ctx, `SELECT subject, master_id, wrapped FROM data_keys
WHERE master_id <> $1 ORDER BY subject LIMIT $2`, master, limit)
	if err != nil {
		return nil, fmt.Errorf("data keys: keys to rewrap: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyring.WrappedKey, error) {
		var k keyring.WrappedKey
		err := r.Scan(&k.Subject, &k.Master, &k.Wrapped)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("data keys: keys to rewrap: %w", err)
	}
	return keys, nil
}

// Rewrap replaces a key wrapped by from with one wrapped by to, as
// [keyring.Store] describes.
func (DataKeys) Rewrap(ctx context.Context, t uow.Tx, subject, from, to string, wrapped []byte) error {
	ptx, err := PgxTx(t)
	if err != nil {
		return fmt.Errorf("data keys: %w", err)
	}
	if _, err := ptx.Exec(ctx, `UPDATE data_keys SET master_id = $3, wrapped = $4 WHERE subject = $1 AND master_id = $2`,
		subject, from, to, wrapped); err != nil {
		return fmt.Errorf("data keys: rewrap key of %s: %w", subject, err)
	}
	return nil
}
