package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Querier is how the stores of this package, and tests, send statements in
// a unit of work: the statement methods of a pgx transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pipeTx is the transaction of a unit of work on one connection of the
// pool. It spends as few round trips as it can: its BEGIN goes to the
// server in one pipeline with its first statement, and the statements held
// with [pipeTx.hold], whose outcome the unit of work does not wait for, go
// with the next statement or with the COMMIT.
//
// A failed statement fails its transaction, as in any PostgreSQL
// transaction; the error of a held statement is returned by the call that
// sent it (the next statement, or Commit). Once it has committed or rolled
// back, every method returns [pgx.ErrTxClosed], and its connection is never
// touched again. It is not safe for concurrent use, as no pgx transaction is.
type pipeTx struct {
	conn *pgx.Conn
	// begin is the statement that begins the transaction until it is sent,
	// then "".
	begin string
	// held are the statements not yet sent, in order.
	held   []heldStatement
	closed bool
}

var _ Querier = (*pipeTx)(nil)

// heldStatement is a statement of [pipeTx.hold].
type heldStatement struct {
	sql  string
	args []any
	// wrap describes an error of the statement, as its store would.
	wrap func(error) error
}

// newPipeTx returns the transaction that begin begins on conn, sending
// nothing yet.
func newPipeTx(conn *pgx.Conn, begin string) *pipeTx {
	return &pipeTx{conn: conn, begin: begin}
}

// pending reports whether something waits to be sent before the next
// statement.
func (p *pipeTx) pending() bool { return p.begin != "" || len(p.held) > 0 }

// hold queues a statement to be sent with the next one, or with the commit.
// Its error, described by wrap, is returned by that call.
func (p *pipeTx) hold(sql string, args []any, wrap func(error) error) error {
	if p.closed {
		return pgx.ErrTxClosed
	}
	p.held = append(p.held, heldStatement{sql: sql, args: args, wrap: wrap})
	return nil
}

// send sends, in one pipeline, what is pending and then sql, when it is not
// "", and reads the results of what was pending. It returns the results
// positioned at sql's, which the caller reads and closes; on an error they
// are closed already.
func (p *pipeTx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(p.held)+2)}
	began := p.begin != ""
	if began {
		b.Queue(p.begin)
	}
	held := p.held
	for _, h := range held {
		b.Queue(h.sql, h.args...)
	}
	if sql != "" {
		b.Queue(sql, args...)
	}
	p.begin, p.held = "", nil
	br := p.conn.SendBatch(ctx, b)
	if began {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	for _, h := range held {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, h.wrap(err)
		}
	}
	return br, nil
}

// flush sends what is pending, if anything.
func (p *pipeTx) flush(ctx context.Context) error {
	if !p.pending() {
		return nil
	}
	br, err := p.send(ctx, "", nil)
	if err != nil {
		return err
	}
	return br.Close()
}

// Exec runs sql after what is pending, in the same round trip. A statement
// without arguments, which may be several statements in one string, goes
// on its own after them, as pgx sends it through the simple protocol.
func (p *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if p.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	if !p.pending() {
		return p.conn.Exec(ctx, sql, args...)
	}
	if len(args) == 0 {
		if err := p.flush(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
		return p.conn.Exec(ctx, sql)
	}
	br, err := p.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs sql after what is pending, in the same round trip.
func (p *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if p.closed {
		return errRows{pgx.ErrTxClosed}, pgx.ErrTxClosed
	}
	if !p.pending() {
		return p.conn.Query(ctx, sql, args...)
	}
	br, err := p.send(ctx, sql, args)
	if err != nil {
		return errRows{err}, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return errRows{err}, err
	}
	return &pipeRows{Rows: rows, br: br}, nil
}

// QueryRow is Query for at most one row.
func (p *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !p.closed && !p.pending() {
		return p.conn.QueryRow(ctx, sql, args...)
	}
	rows, err := p.Query(ctx, sql, args...)
	return pipeRow{rows: rows, err: err}
}

// Commit sends what is pending and COMMIT in one round trip. When a held
// statement fails, it returns that statement's error and leaves the failed
// transaction to [pipeTx.Rollback]. A COMMIT that PostgreSQL answers with a
// rollback, because the transaction had failed before, is
// [pgx.ErrTxCommitRollback], as pgx reports it. A transaction that sent
// nothing still sends its BEGIN and COMMIT, in one round trip, so that a
// server that cannot be reached is an error for every unit of work.
func (p *pipeTx) Commit(ctx context.Context) error {
	if p.closed {
		return pgx.ErrTxClosed
	}
	br, err := p.send(ctx, "commit", nil)
	if err != nil {
		return err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	p.closed = true
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback drops what is pending and rolls back what was sent; it sends
// nothing when no transaction is open on the connection. It is safe to call
// after Commit, when it returns [pgx.ErrTxClosed]. A connection whose
// rollback fails is closed, so that the pool never hands it out again.
func (p *pipeTx) Rollback(ctx context.Context) error {
	if p.closed {
		return pgx.ErrTxClosed
	}
	p.closed = true
	p.begin, p.held = "", nil
	if p.conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	if _, err := p.conn.Exec(ctx, "rollback"); err != nil {
		_ = p.conn.Close(ctx)
		return err
	}
	return nil
}

// pipeRows are the rows of a statement sent in a pipeline. They close the
// pipeline's results once read to the end or closed, so the connection is
// free again.
type pipeRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *pipeRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.finish()
	return false
}

func (r *pipeRows) Close() {
	r.Rows.Close()
	r.finish()
}

func (r *pipeRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *pipeRows) finish() {
	if r.br == nil {
		return
	}
	if err := r.br.Close(); err != nil && r.err == nil {
		r.err = err
	}
	r.br = nil
}

// pipeRow is the row of [pipeTx.QueryRow] when it goes through a pipeline.
// Its Scan behaves as pgx's.
type pipeRow struct {
	rows pgx.Rows
	err  error
}

func (r pipeRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// errRows are the rows of a statement that could not be sent.
type errRows struct{ err error }

func (r errRows) Close()                                       {}
func (r errRows) Err() error                                   { return r.err }
func (r errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                            { return r.err }
func (r errRows) Values() ([]any, error)                       { return nil, r.err }
func (r errRows) RawValues() [][]byte                          { return nil }
func (r errRows) Conn() *pgx.Conn                              { return nil }
func (r errRows) TypeMap() *pgtype.Map                         { return nil }
