package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventsourced/accounts/internal/uow"
)

// pkg names this package in errors.
const pkg = "postgres"

// Runner runs units of work in PostgreSQL transactions.
type Runner struct {
	db  *DB
	now func() time.Time
}

var _ uow.Runner = (*Runner)(nil)

// tx is the [uow.Tx] of this backend. Its statements go through q: the
// pipeTx itself, or in a read-only unit of work a [readOnlyTx] around it.
type tx struct {
	q    Querier
	pipe *pipeTx
	db   *DB
	now  time.Time
	// afterCommit runs, in order, once the transaction has committed, and
	// never when it rolls back; afterRollback once it has rolled back or
	// failed to commit, and never when it commits. hooked is set in the
	// units of work of [Runner.Do], the only ones that run them.
	afterCommit, afterRollback []func()
	hooked                     bool
	// wakes is set once afterCommit wakes the relays of db, wakesLog once
	// it wakes the subscribers of its log.
	wakes, wakesLog bool
}

func (t *tx) Now() time.Time { return t.now }

// later sends sql, a write whose outcome the unit of work does not wait
// for, with the transaction's next statement or with its commit, saving it
// a round trip; the call that sends it returns its error, described by
// wrap, and the unit of work then rolls back. In a read-only unit of work
// it runs at once, so that the refusal is the caller's error.
func (t *tx) later(ctx context.Context, sql string, args []any, wrap func(error) error) error {
	if _, ro := t.q.(readOnlyTx); ro {
		if _, err := t.q.Exec(ctx, sql, args...); err != nil {
			return wrap(err)
		}
		return nil
	}
	if err := t.pipe.hold(sql, args, wrap); err != nil {
		return wrap(err)
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

// wakeRelays makes the commit of t wake the relays of its DB, once however
// often it is called: those of this process at once, those of others
// through the DB's notifier.
func (t *tx) wakeRelays() {
	if t.wakes {
		return
	}
	t.wakes = true
	t.onCommit(t.db.wakeRelays)
}

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

// Do runs fn in a transaction, as [uow.Runner] describes. Its BEGIN costs
// no round trip of its own: it goes to the server with the first statement
// (see [pipeTx]); nor do the writes that stores hold back ([tx.later]),
// which go with the next statement or the COMMIT. The transaction's
// time is read from the runner's clock once, in UTC, to the microsecond that
// PostgreSQL keeps. When the server cannot be reached, went away or has no
// connection to spare, the error (of beginning, of fn or of committing)
// wraps [uow.ErrUnavailable]. After a commit it runs the transaction's
// after-commit hooks, by which [Outbox.Add] wakes relays and hands them
// what they took; after a rollback, or a failed commit, its
// after-rollback hooks, by which Add gives back what they took. A
// transaction that PostgreSQL aborted as the loser of a deadlock
// or a serialization failure returns an error wrapping
// [eventstore.ErrConcurrency] too: it changed nothing, and a command tries
// it again.
//
// Do starts no span of its own: in a trace each round trip is a span
// ([statementTracer]), the BEGIN's and the COMMIT's among them, under the
// span of the command, so the wait for a connection of the pool is the
// gap before the first.
func (r *Runner) Do(ctx context.Context, fn func(ctx context.Context, tx uow.Tx) error) error {
	conn, err := r.db.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", unavailable(ctx, err))
	}
	defer conn.Release()
	ptx := r.db.newPipeTx(conn.Conn(), "begin")
	t := &tx{q: ptx, pipe: ptx, db: r.db, now: r.clock(), hooked: true}
	committed := false
	// This covers errors and panics: the transaction is rolled back, then
	// the hooks of a rollback run.
	defer func() {
		if !committed {
			_ = ptx.Rollback(context.WithoutCancel(ctx))
			for _, fn := range t.afterRollback {
				fn()
			}
		}
	}()
	if err := fn(ctx, t); err != nil {
		return lostRace(unavailable(ctx, err))
	}
	if err := ptx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit: %w", lostRace(unavailable(ctx, err)))
	}
	committed = true
	for _, fn := range t.afterCommit {
		fn()
	}
	return nil
}

// Read runs fn in a read-only transaction, as [uow.Runner] describes: BEGIN
// ISOLATION LEVEL REPEATABLE READ READ ONLY on the main pool. Repeatable
// read gives the whole unit of work the snapshot of its first statement,
// where read committed would take one per statement; a read-only
// transaction at that level never fails to serialise and waits for no
// writer's row locks. PostgreSQL refuses a write in it with SQLSTATE 25006
// (read_only_sql_transaction), which its Tx reports wrapping
// [uow.ErrReadOnly]; the transaction then refuses every further statement.
// Its time is read as Do's. It ends with a rollback, since it has nothing
// to commit.
func (r *Runner) Read(ctx context.Context, fn func(ctx context.Context, tx uow.Tx) error) error {
	conn, err := r.db.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin read: %w", unavailable(ctx, err))
	}
	defer conn.Release()
	ptx := r.db.newPipeTx(conn.Conn(), "begin isolation level repeatable read read only")
	defer func() { _ = ptx.Rollback(context.WithoutCancel(ctx)) }()
	return unavailable(ctx, fn(ctx, &tx{q: readOnlyTx{ptx}, pipe: ptx, db: r.db, now: r.clock()}))
}

// newPipeTx returns the transaction that begin begins on conn, which sets
// the DB's settings first behind a transaction pooler, in the same round
// trip as its first statement.
func (db *DB) newPipeTx(conn *pgx.Conn, begin string) *pipeTx {
	p := newPipeTx(conn, begin)
	if db.local != nil {
		_ = p.hold(db.local.sql, db.local.args, func(err error) error { return fmt.Errorf("postgres: settings: %w", err) })
	}
	return p
}

// clock returns the time of a unit of work that begins now: one reading of
// the runner's clock, in UTC, to the microsecond that PostgreSQL keeps.
func (r *Runner) clock() time.Time { return r.now().UTC().Truncate(time.Microsecond) }

// readOnlyTx is the [Querier] of a read-only unit of work. Its Exec, Query
// and QueryRow, by which the stores reach PostgreSQL, add [uow.ErrReadOnly]
// to PostgreSQL's refusal of a write, so that callers tell it with
// errors.Is on every backend.
type readOnlyTx struct{ Querier }

func (t readOnlyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Querier.Exec(ctx, sql, args...)
	return tag, readOnly(err)
}

func (t readOnlyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := t.Querier.Query(ctx, sql, args...)
	if rows == nil {
		return nil, readOnly(err)
	}
	return readOnlyRows{rows}, readOnly(err)
}

func (t readOnlyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return readOnlyRow{t.Querier.QueryRow(ctx, sql, args...)}
}

// readOnlyRows are the rows of [readOnlyTx.Query], whose error PostgreSQL
// may send once the statement runs.
type readOnlyRows struct{ pgx.Rows }

func (r readOnlyRows) Err() error { return readOnly(r.Rows.Err()) }

// readOnlyRow is the row of [readOnlyTx.QueryRow].
type readOnlyRow struct{ pgx.Row }

func (r readOnlyRow) Scan(dest ...any) error { return readOnly(r.Row.Scan(dest...)) }

// sqlstateReadOnly is PostgreSQL's read_only_sql_transaction: a write in a
// read-only transaction.
const sqlstateReadOnly = "25006"

// readOnly returns err, wrapped with [uow.ErrReadOnly] when it is
// PostgreSQL's refusal of a write in a read-only transaction.
func readOnly(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateReadOnly {
		return fmt.Errorf("%s: %w: %w", pkg, uow.ErrReadOnly, err)
	}
	return err
}

// PgxTx returns the statements of the pgx transaction inside a [uow.Tx]
// made by a [Runner] of this package, or an error wrapping
// [uow.ErrForeignTx]. The transaction begins, commits and rolls back with
// its unit of work; once that has ended, every statement fails with
// [pgx.ErrTxClosed].
func PgxTx(t uow.Tx) (Querier, error) {
	pt, err := asTx(t)
	if err != nil {
		return nil, err
	}
	return pt.q, nil
}

// asTx returns the tx inside t, or an error wrapping [uow.ErrForeignTx].
func asTx(t uow.Tx) (*tx, error) {
	pt, ok := t.(*tx)
	if !ok || pt == nil {
		return nil, uow.Foreign(pkg, t)
	}
	return pt, nil
}
