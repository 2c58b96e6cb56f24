package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// openSQL returns pool as database/sql, for watermill-sql and goose. When
// set is not nil, every transaction of it sets set first, and a statement
// outside a transaction runs in one of its own that does: behind a
// transaction pooler, no setting outlives the transaction it was made in.
func openSQL(pool *pgxpool.Pool, set *settings) *sql.DB {
	if set == nil {
		return stdlib.OpenDBFromPool(pool)
	}
	db := sql.OpenDB(localConnector{Connector: stdlib.GetPoolConnector(pool), set: set})
	db.SetMaxIdleConns(0) // The pgx pool keeps the idle connections.
	return db
}

// localConnector makes the connections of [openSQL].
type localConnector struct {
	driver.Connector
	set *settings
}

func (c localConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(*stdlib.Conn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("postgres: database/sql connection is a %T, not pgx's", conn)
	}
	return &localConn{Conn: sc, set: c.set}, nil
}

// localConn is pgx's database/sql connection whose transactions begin with
// the settings of set.
type localConn struct {
	*stdlib.Conn
	set *settings
}

func (c *localConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	if _, err := c.Conn.Conn().Exec(ctx, c.set.sql, c.set.args...); err != nil {
		return nil, errors.Join(err, tx.Rollback())
	}
	return tx, nil
}

// idle reports whether no transaction is open on the connection.
func (c *localConn) idle() bool { return c.Conn.Conn().PgConn().TxStatus() == 'I' }

func (c *localConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if !c.idle() {
		return c.Conn.ExecContext(ctx, query, args)
	}
	tx, err := c.BeginTx(ctx, driver.TxOptions{})
	if err != nil {
		return nil, err
	}
	res, err := c.Conn.ExecContext(ctx, query, args)
	if err != nil {
		return nil, errors.Join(err, tx.Rollback())
	}
	return res, tx.Commit()
}

func (c *localConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if !c.idle() {
		return c.Conn.QueryContext(ctx, query, args)
	}
	tx, err := c.BeginTx(ctx, driver.TxOptions{})
	if err != nil {
		return nil, err
	}
	rows, err := c.Conn.QueryContext(ctx, query, args)
	if err != nil {
		return nil, errors.Join(err, tx.Rollback())
	}
	return &committingRows{Rows: rows, tx: tx}, nil
}

// committingRows are the rows of a statement that [localConn] ran in a
// transaction of its own, which ends when they are closed.
type committingRows struct {
	driver.Rows
	tx driver.Tx
}

func (r *committingRows) Close() error {
	if err := r.Rows.Close(); err != nil {
		return errors.Join(err, r.tx.Rollback())
	}
	return r.tx.Commit()
}
