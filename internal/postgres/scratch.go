package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// CreateSchema creates an empty schema with a random name that starts with
// prefix in the database at url, and returns its name and a function that
// drops it with everything in it. Tests and benchmarks use it to leave no
// trace in the database.
func CreateSchema(ctx context.Context, url, prefix string) (schema string, drop func(context.Context) error, err error) {
	// The pool's parser, so that a URL with pool settings such as
	// pool_max_conns, which the server would refuse, works here too.
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	cfg := poolCfg.ConnConfig
	// CREATE and DROP SCHEMA need no setting, and a pooler would refuse
	// most as startup parameters.
	takeSettings(cfg)
	schema = prefix + strings.ToLower(rand.Text()[:16])
	quoted := pgx.Identifier{schema}.Sanitize()
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return fmt.Errorf("postgres: connect: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("postgres: %s: %w", sql, err)
		}
		return nil
	}
	if err := exec(ctx, "CREATE SCHEMA "+quoted); err != nil {
		return "", nil, err
	}
	return schema, func(ctx context.Context) error { return exec(ctx, "DROP SCHEMA "+quoted+" CASCADE") }, nil
}

// OpenScratch creates a schema as [CreateSchema] does and returns a migrated
// [DB], opened with opts, whose connections use only that schema. drop
// closes the DB and drops the schema. Before it migrates, it checks that
// every connection of the DB works in the new schema ([DB.CheckSchema]),
// and fails otherwise, having written nothing.
func OpenScratch(ctx context.Context, url, prefix string, opts ...Option) (db *DB, drop func(context.Context) error, err error) {
	cfg, err := ParseConfig(url)
	if err != nil {
		return nil, nil, err
	}
	schema, dropSchema, err := CreateSchema(ctx, url, prefix)
	if err != nil {
		return nil, nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	db, err = OpenConfig(ctx, cfg, opts...)
	if err != nil {
		return nil, nil, errors.Join(err, dropSchema(context.WithoutCancel(ctx)))
	}
	drop = func(ctx context.Context) error {
		db.Close()
		return dropSchema(ctx)
	}
	// Nothing is written before every connection is known to work in the
	// new schema: a pooler that dropped the search_path would have the
	// migrations, and then the caller, write into the database's own.
	if err := db.CheckSchema(ctx, schema); err != nil {
		return nil, nil, errors.Join(err, drop(context.WithoutCancel(ctx)))
	}
	if _, err := db.Migrate(ctx); err != nil {
		return nil, nil, errors.Join(err, drop(context.WithoutCancel(ctx)))
	}
	return db, drop, nil
}
