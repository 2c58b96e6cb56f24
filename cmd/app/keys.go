package main

import (
	"context"
	"fmt"
	"io"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/operator"
)

// keyring returns the keyring of the personal data on db: its master keys
// come from DATA_KEY, or, on SQLite without it, from a key file beside the
// database, made at the first start, which is logged as a warning: a key
// kept with the data it protects is for trying the service only.
// PostgreSQL needs DATA_KEY.
func (e env) keyring(db backend.Backend) (*keyring.Keyring, error) {
	var masters keyring.Masters
	switch d, err := e.database(); {
	case err != nil:
		return nil, err
	case e.cfg.DataKey != "":
		if masters, err = keyring.ParseMasters(e.cfg.DataKey); err != nil {
			return nil, fmt.Errorf("DATA_KEY: %w", err)
		}
	case d.sqlitePath != "":
		path := d.sqlitePath + ".key"
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
	default:
		return nil, fmt.Errorf("DATA_KEY: required with PostgreSQL; app keys new makes one")
	}
	return keyring.New(masters, db.DataKeys())
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
	db, err := e.openExistingDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	k, err := e.keyring(db)
	if err != nil {
		return err
	}
	return operator.RotateKeys(ctx, db.Runner(nil), k, stdout)
}
