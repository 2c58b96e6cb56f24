package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// OtherProcessLog returns a Log of db configured by cfg on a pool of its
// own, as another process would open it, closed when t ends, and crash:
// once it is called, each connection of the pool closes at its next use,
// which rolls back its transaction as the death of its process would, and
// fails with [driver.ErrBadConn]; no new connection opens.
func OtherProcessLog(t testing.TB, db *DB, cfg LogConfig) (log *Log, crash func()) {
	c := &crashConnector{driver: db.write.Driver(), dsn: db.logDSN}
	pool := sql.OpenDB(c)
	limitLogPool(pool)
	t.Cleanup(func() { _ = pool.Close() })
	return newLog(db, pool, cfg), func() { c.crashed.Store(true) }
}

// errCrashed is what a crashed pool answers to a new connection.
var errCrashed = errors.New("sqlite test: the process has crashed")

// crashConnector opens the connections of [OtherProcessLog].
type crashConnector struct {
	driver  driver.Driver
	dsn     string
	crashed atomic.Bool
}

func (c *crashConnector) Connect(context.Context) (driver.Conn, error) {
	if c.crashed.Load() {
		return nil, errCrashed
	}
	conn, err := c.driver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &crashConn{conn: conn, crashed: &c.crashed}, nil
}

func (c *crashConnector) Driver() driver.Driver { return c.driver }

// driverConn is what database/sql uses of a modernc.org/sqlite connection.
type driverConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
}

// crashConn is a connection of a crashConnector. database/sql uses a
// connection from one goroutine at a time, so the one that finds the pool
// crashed closes the connection.
type crashConn struct {
	conn    driver.Conn
	crashed *atomic.Bool
	once    sync.Once
}

// dead reports whether the pool has crashed, and closes the connection
// when it has.
func (c *crashConn) dead() bool {
	if !c.crashed.Load() {
		return false
	}
	c.once.Do(func() { _ = c.conn.Close() })
	return true
}

func (c *crashConn) inner() driverConn { return c.conn.(driverConn) }

func (c *crashConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *crashConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if c.dead() {
		return nil, driver.ErrBadConn
	}
	return c.inner().PrepareContext(ctx, query)
}

func (c *crashConn) Close() error {
	var err error
	c.once.Do(func() { err = c.conn.Close() })
	return err
}

func (c *crashConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *crashConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.dead() {
		return nil, driver.ErrBadConn
	}
	tx, err := c.inner().BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return crashTx{tx: tx, c: c}, nil
}

func (c *crashConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.dead() {
		return nil, driver.ErrBadConn
	}
	return c.inner().ExecContext(ctx, query, args)
}

func (c *crashConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.dead() {
		return nil, driver.ErrBadConn
	}
	return c.inner().QueryContext(ctx, query, args)
}

func (c *crashConn) ResetSession(context.Context) error {
	if c.dead() {
		return driver.ErrBadConn
	}
	return nil
}

func (c *crashConn) IsValid() bool { return !c.dead() }

// crashTx is a transaction of a crashConn: it does not commit once the
// pool has crashed.
type crashTx struct {
	tx driver.Tx
	c  *crashConn
}

func (t crashTx) Commit() error {
	if t.c.dead() {
		return driver.ErrBadConn
	}
	return t.tx.Commit()
}

func (t crashTx) Rollback() error {
	if t.c.dead() {
		return nil
	}
	return t.tx.Rollback()
}
