package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/eventsourced/accounts/internal/uow"
)

// Runner runs units of work in SQLite transactions: those of [Runner.Do]
// on the write connection of its [DB], one at a time, and those of
// [Runner.Read] on its read pool, beside them.
type Runner struct {
	db  *DB
	now func() time.Time
}

var _ uow.Runner = (*Runner)(nil)

// errNested is returned by a write that would wait for the unit of work it
// runs in.
var errNested = errors.New("a unit of work holds the write connection of this database; a write made inside it would wait for it for ever")

// errReadOnly is returned by a write through the Tx of a read-only unit of
// work.
var errReadOnly = fmt.Errorf("%s: %w", pkg, uow.ErrReadOnly)

// unitOfWorkKey marks the context of a unit of work with its DB.
type unitOfWorkKey struct{}

// checkNotNested returns an error wrapping errNested when ctx is the
// context of a unit of work of db.
func checkNotNested(ctx context.Context, db *DB) error {
	if in, _ := ctx.Value(unitOfWorkKey{}).(*DB); in == db {
		return errNested
	}
	return nil
}

// tx is the [uow.Tx] of this backend.
type tx struct {
	*sql.Tx
	db  *DB
	now time.Time
	// readOnly marks the transactions of [Runner.Read], on the read pool.
	readOnly bool
	// afterCommit runs, in order, once the transaction has committed, and
	// never when it rolls back; afterRollback once it has rolled back or
	// failed to commit, and never when it commits. hooked is set in the
	// units of work of [Runner.Do], the only ones that run them: those of
	// the log's subscribers ([Log.Apply], [Log.Catalog]) run none.
	afterCommit, afterRollback []func()
	hooked                     bool
	// wakes is set once afterCommit wakes the relays of db, wakesLog once
	// it wakes the subscribers of its log.
	wakes, wakesLog bool
}

func (t *tx) Now() time.Time { return t.now }

// wakeLog makes the commit of t wake the subscribers of its DB's event log
// in this process, once however often it is called; those of other
// processes find the events at their next poll.
func (t *tx) wakeLog() {
	if t.wakesLog {
		return
	}
	t.wakesLog = true
	t.onCommit(t.db.logWake.Wake)
}

// ExecContext runs a statement in t as [sql.Tx.ExecContext] does, except
// in a read-only unit of work: there it runs nothing and returns an error
// wrapping [uow.ErrReadOnly]. Every write of this backend's stores goes
// through it. The read pool's connections are query_only besides, so a
// write that took another way would fail too, with SQLite's own error.
func (t *tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if t.readOnly {
		return nil, errReadOnly
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

// writing returns an error wrapping [uow.ErrReadOnly] in a read-only unit
// of work, for a write that returns rows (RETURNING) and so goes through
// QueryContext rather than ExecContext.
func (t *tx) writing() error {
	if t.readOnly {
		return errReadOnly
	}
	return nil
}

// onCommit makes fn run once t has committed, and never if it rolls back.
func (t *tx) onCommit(fn func()) { t.afterCommit = append(t.afterCommit, fn) }

// onEnd makes committed run once t has committed, and rolledBack once it
// has rolled back or failed to commit.
func (t *tx) onEnd(committed, rolledBack func()) {
	t.afterCommit = append(t.afterCommit, committed)
	t.afterRollback = append(t.afterRollback, rolledBack)
}

// asTx returns the tx inside t, or an error wrapping [uow.ErrForeignTx].
func asTx(t uow.Tx) (*tx, error) {
	st, ok := t.(*tx)
	if !ok || st == nil {
		return nil, uow.Foreign(pkg, t)
	}
	return st, nil
}

// Do runs fn in a transaction, as [uow.Runner] describes. The transaction
// begins with BEGIN IMMEDIATE once the write connection is free; its time
// is read from the runner's clock once, in UTC, to the microsecond that the
// stores keep. After a commit it runs the transaction's after-commit
// hooks, by which [Outbox.Add] wakes the relays of this process and hands
// them what they took; after a rollback, or a failed commit, its
// after-rollback hooks, by which Add gives back what they took. In a
// trace, the unit of work is a span of its own ([unitSpan]).
//
// When another process holds the write lock for longer than the busy
// timeout, the error (of beginning, of fn or of committing) wraps
// [uow.ErrUnavailable].
//
// fn must not make another write of the same DB, such as a nested Do: with
// the context it is given, that write returns an error instead of waiting
// for this unit of work to end.
func (r *Runner) Do(ctx context.Context, fn func(ctx context.Context, tx uow.Tx) error) error {
	if err := checkNotNested(ctx, r.db); err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	ctx, span := r.db.startUnit(ctx, "sqlite transaction")
	defer span.end()
	stx, err := r.db.write.BeginTx(ctx, nil)
	if err != nil {
		span.fail("begin failed", err)
		return fmt.Errorf("sqlite: begin: %w", unavailable(ctx, err))
	}
	span.event(eventBegun)
	t := &tx{Tx: stx, db: r.db, now: r.clock(), hooked: true}
	committed := false
	// This covers errors and panics: the transaction is rolled back, which
	// frees the write connection, then the hooks of a rollback run.
	defer func() {
		if !committed {
			_ = stx.Rollback()
			for _, fn := range t.afterRollback {
				fn()
			}
		}
	}()
	if err := fn(context.WithValue(ctx, unitOfWorkKey{}, r.db), t); err != nil {
		span.event(eventRollback)
		return unavailable(ctx, err)
	}
	span.event(eventCommit)
	if err := stx.Commit(); err != nil {
		span.fail("commit failed", err)
		return fmt.Errorf("sqlite: commit: %w", unavailable(ctx, err))
	}
	committed = true
	for _, fn := range t.afterCommit {
		fn()
	}
	return nil
}

// Read runs fn in a read-only transaction, as [uow.Runner] describes, on a
// connection of the read pool. The transaction begins with a deferred
// BEGIN, so it takes its snapshot at its first read, and WAL mode lets it
// read that snapshot while a unit of work of [Runner.Do] writes and
// commits: Read waits neither for the write connection nor for the unit of
// work that holds it. A write through its Tx returns an error wrapping
// [uow.ErrReadOnly] before it reaches SQLite, and leaves the transaction
// usable for reads. Its time is read as Do's. It ends with a rollback,
// since it has nothing to commit, and runs no after-commit hooks.
//
// fn may run units of work of Do: Read holds no connection that they need.
func (r *Runner) Read(ctx context.Context, fn func(ctx context.Context, tx uow.Tx) error) error {
	ctx, span := r.db.startUnit(ctx, "sqlite read transaction")
	defer span.end()
	stx, err := r.db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		span.fail("begin failed", err)
		return fmt.Errorf("sqlite: begin read: %w", err)
	}
	span.event(eventBegun)
	defer func() { _ = stx.Rollback() }()
	return fn(ctx, &tx{Tx: stx, db: r.db, now: r.clock(), readOnly: true})
}

// clock returns the time of a unit of work that begins now: one reading of
// the runner's clock, in UTC, to the microsecond that the stores keep.
func (r *Runner) clock() time.Time { return r.now().UTC().Truncate(time.Microsecond) }

// atomically runs fn so that it writes all or nothing: inside a savepoint
// when several statements write (multi), as is; a single statement is
// atomic by itself.
func (t *tx) atomically(ctx context.Context, multi bool, fn func() error) error {
	if !multi {
		return fn()
	}
	if _, err := t.ExecContext(ctx, `SAVEPOINT atomically`); err != nil {
		return err
	}
	if err := fn(); err != nil {
		_, rbErr := t.ExecContext(context.WithoutCancel(ctx), `ROLLBACK TO atomically`)
		_, relErr := t.ExecContext(context.WithoutCancel(ctx), `RELEASE atomically`)
		return errors.Join(err, rbErr, relErr)
	}
	_, err := t.ExecContext(ctx, `RELEASE atomically`)
	return err
}
