package sqlite

import (
	"context"
	"errors"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/eventsourced/accounts/internal/uow"
)

// unavailable returns err wrapped with [uow.ErrUnavailable] when it says
// that the database is busy: SQLITE_BUSY, another connection (in practice
// another process) held the lock for longer than the busy timeout, or
// SQLITE_LOCKED, a table was locked by another connection of the same
// shared cache. Any other error, and one of a context that the caller
// cancelled, is returned as it is.
func unavailable(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	if isBusy(err) {
		return uow.Unavailable(err)
	}
	return err
}

// isBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED, in any of
// their extended codes.
func isBusy(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	// The primary code is the low byte of an extended one, such as
	// SQLITE_BUSY_SNAPSHOT.
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// isConstraint reports whether err is SQLite's constraint error code, an
// extended code such as SQLITE_CONSTRAINT_UNIQUE.
func isConstraint(err error, code int) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code() == code
}
