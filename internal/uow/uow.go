package uow

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrForeignTx is returned by a store that is handed a [Tx] made by another
// backend's [Runner].
var ErrForeignTx = errors.New("uow: transaction belongs to another backend")

// ErrReadOnly is returned, wrapped, by a store asked to write through the
// [Tx] of a read-only unit of work ([Runner.Read]).
var ErrReadOnly = errors.New("uow: write in a read-only unit of work")

// ErrUnavailable is wrapped by the errors of a backend whose database cannot
// be reached or is busy: the server is down, restarting or refusing
// connections, a connection broke, or (SQLite) another process held the
// write lock for longer than the busy timeout. The work was not done, or a
// unit of work was rolled back, and the same call may succeed a little
// later. The driver's error stays wrapped beside it. A context that the
// caller cancelled is not reported as ErrUnavailable.
var ErrUnavailable = errors.New("uow: the database cannot be reached or is busy")

// Tx is an open unit of work. It is valid only inside the function passed to
// [Runner.Do] or [Runner.Read]; stores assert it to their backend's concrete
// type.
type Tx interface {
	// Now is the time of the unit of work: one clock reading taken when it
	// began, so that everything it writes carries the same time and tests
	// control that time through the runner's clock.
	Now() time.Time
}

// Runner runs units of work.
type Runner interface {
	// Do begins a transaction and calls fn with it. It commits when fn
	// returns nil and rolls back when fn returns an error or panics; a panic
	// is re-raised after the rollback. The error of fn is returned as it is,
	// so callers can test it with errors.Is, except that an error saying the
	// database cannot be reached or is busy is wrapped with [ErrUnavailable]
	// (as the errors of beginning and committing are).
	Do(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// Read calls fn with a read-only transaction, for a unit of work that
	// changes nothing, such as a query. The transaction sees one consistent
	// snapshot of what was committed, taken at its first read, and nothing
	// committed after. A write through its Tx fails with an error wrapping
	// [ErrReadOnly] and changes nothing; the unit of work should then end
	// with that error, since on some backends the transaction can make no
	// further reads. Read never waits for a writer of this process, and a
	// unit of work of Do can commit while it is open. Its Tx's Now is read
	// from the runner's clock once, as Do's is. The error of fn is returned
	// as it is, except that an error saying the database cannot be reached
	// or is busy is wrapped with [ErrUnavailable], as Do's is; a panic of fn
	// is raised again once the transaction has ended.
	Read(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
}

// Unavailable returns err wrapped so that errors.Is(err, [ErrUnavailable])
// holds, or err as it is when it holds already. Backends call it on driver
// errors that mean their database cannot be reached or is busy.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Foreign returns an error wrapping [ErrForeignTx] that names the backend
// that refused tx and the type it was given.
func Foreign(backend string, tx Tx) error {
	return fmt.Errorf("%s: %w: got %T", backend, ErrForeignTx, tx)
}
