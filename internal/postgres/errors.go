package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// PostgreSQL's SQLSTATEs that this package tells apart.
const (
	uniqueViolation  = "23505" // a duplicate key
	notNullViolation = "23502" // a NULL in a NOT NULL column
)

// unavailable returns err wrapped with [uow.ErrUnavailable] when it says
// that the database cannot be reached or is busy, and err as it is
// otherwise. An error of a context that the caller cancelled stays as it
// is: the caller gave up, the database did not fail.
func unavailable(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	if isUnavailable(err) {
		return uow.Unavailable(err)
	}
	return err
}

// lostRace returns err wrapped with [eventstore.ErrConcurrency] beside the
// driver's error when PostgreSQL aborted the transaction as the loser of a
// deadlock (40P01) or of a serialization failure (40001): the unit of work
// changed nothing and may be tried again, as a command that lost an
// append's race is.
func lostRace(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") && !errors.Is(err, eventstore.ErrConcurrency) {
		return fmt.Errorf("%w: %w", eventstore.ErrConcurrency, err)
	}
	return err
}

// isUnavailable reports whether err says that the server cannot be
// reached, went away, is shutting down or starting, has no connection
// left, or did not answer in time. database/sql says "bad connection"
// (driver.ErrBadConn) for a transaction whose connection broke, as every
// open transaction of the event log's subscribers does when the server
// restarts.
func isUnavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case strings.HasPrefix(code, "08"), // connection exception
			code == "57P01", // admin_shutdown, also pg_terminate_backend
			code == "57P02", // crash_shutdown
			code == "57P03", // cannot_connect_now: starting up or shutting down
			code == "53300": // too_many_connections
			return true
		}
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) ||
		errors.As(err, &netErr) ||
		pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || // waited too long for a pooled connection
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
