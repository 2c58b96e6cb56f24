package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/operator"
	"github.com/eventsourced/accounts/internal/uow"
)

// dataKey returns the master keys of DATA_KEY or, on SQLite without it,
// the path of the key file beside the database. PostgreSQL without
// DATA_KEY is an error, which a command finds before it opens the
// database.
func (e env) dataKey() (keyring.Masters, string, error) {
	d, err := e.database()
	switch {
	case err != nil:
		return keyring.Masters{}, "", err
	case e.cfg.DataKey != "":
		masters, err := keyring.ParseMasters(e.cfg.DataKey)
		if err != nil {
			return keyring.Masters{}, "", fmt.Errorf("DATA_KEY: %w", err)
		}
		return masters, "", nil
	case d.sqlitePath != "":
		return keyring.Masters{}, d.sqlitePath + ".key", nil
	default:
		return keyring.Masters{}, "", errors.New("DATA_KEY: required with PostgreSQL; app keys new makes one")
	}
}

// keyring returns the keyring of the personal data on db, checked against
// the master keys that wrap its keys ([keyring.Keyring.Check]): its master
// keys come from DATA_KEY, or, on SQLite without it, from a key file
// beside the database, made at the first start, which is logged as a
// warning: a key kept with the data it protects is for trying the service
// only. PostgreSQL needs DATA_KEY.
func (e env) keyring(ctx context.Context, db backend.Backend) (*keyring.Keyring, error) {
	masters, path, err := e.dataKey()
	if err != nil {
		return nil, err
	}
	if path != "" {
		m, created, err := keyring.LoadOrCreateKeyFile(path)
		if err != nil {
			return nil, err
		}
		if created {
			e.log.Warn("DATA_KEY is unset: made a master key file beside the database; set DATA_KEY (app keys new) for anything but trying the service", "path", path)
		} else {
			e.log.Warn("DATA_KEY is unset: the master key is read from the file beside the database; set DATA_KEY (app keys new) for anything but trying the service", "path", path)
		}
		masters = m
	}
	k, err := keyring.New(masters, db.DataKeys())
	if err != nil {
		return nil, err
	}
	if err := db.Runner(nil).Do(ctx, func(ctx context.Context, tx uow.Tx) error { return k.Check(ctx, tx) }); err != nil {
		var me *keyring.MastersError
		if errors.As(err, &me) {
			from := "DATA_KEY"
			if path != "" {
				from = "the key file " + path
			}
			return nil, fmt.Errorf("%s: %w; give the master keys this database was written with, the current one first (app keys rotate then rewraps every key with it)", from, err)
		}
		return nil, err
	}
	return k, nil
}

// openWithKeys opens the database with open and returns it with the
// keyring of its personal data ([env.keyring]). A DATA_KEY that is
// missing is an error before the database is opened, and master keys that
// are not those of its data one before anything is read or written.
func (e env) openWithKeys(ctx context.Context, open func(context.Context) (backend.Backend, error)) (backend.Backend, *keyring.Keyring, error) {
	if _, _, err := e.dataKey(); err != nil {
		return nil, nil, err
	}
	db, err := open(ctx)
	if err != nil {
		return nil, nil, err
	}
	k, err := e.keyring(ctx, db)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return db, k, nil
}

// keysNew prints a DATA_KEY value of one fresh master key named id.
func keysNew(id string, stdout io.Writer) error {
	value, err := keyring.NewMasterKey(id)
	if err != nil {
		return &usageError{err}
	}
	_, err = fmt.Fprintln(stdout, value)
	return err
}

// keysRotate rewraps every data key with the first master key of DATA_KEY,
// a page at a time, each page one unit of work; afterwards DATA_KEY may
// drop the others.
func keysRotate(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	db, k, err := e.openWithKeys(ctx, e.openExistingDB)
	if err != nil {
		return err
	}
	defer db.Close()
	return operator.RotateKeys(ctx, db.Runner(nil), k, stdout)
}
