package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// RestoreSchema copies schema from the database at sourceURL (a libpq
// URL, without parameters libpq does not know, such as search_path) into
// database of c, as an operator's logical backup and restore does:
// pg_dump in its custom format piped into pg_restore, both of c's
// version. Nothing is written to disk but c's data. The copy keeps every
// row and sequence, but no owner or privilege, whose roles c may lack;
// c goes on counting transaction ids from its own count, not the source's.
func (c *Cluster) RestoreSchema(ctx context.Context, sourceURL, schema, database string) error {
	bin := filepath.Join("/usr/lib/postgresql", c.Version, "bin")
	dump := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--format=custom", "--schema="+schema, "--dbname="+sourceURL)
	restore := exec.CommandContext(ctx, filepath.Join(bin, "pg_restore"), "--exit-on-error", "--no-owner", "--no-privileges", "--dbname="+c.URL(database))
	pipe, err := dump.StdoutPipe()
	if err != nil {
		return fmt.Errorf("pgcluster: restore %s: %w", schema, err)
	}
	restore.Stdin = pipe
	var dumpErr, restoreOut bytes.Buffer
	dump.Stderr = &dumpErr
	restore.Stdout, restore.Stderr = &restoreOut, &restoreOut
	if err := dump.Start(); err != nil {
		return fmt.Errorf("pgcluster: pg_dump %s: %w", schema, err)
	}
	rerr := restore.Run()
	derr := dump.Wait()
	if derr != nil {
		derr = fmt.Errorf("pg_dump: %w: %s", derr, strings.TrimSpace(dumpErr.String()))
	}
	if rerr != nil {
		rerr = fmt.Errorf("pg_restore: %w: %s", rerr, strings.TrimSpace(restoreOut.String()))
	}
	if err := errors.Join(derr, rerr); err != nil {
		return fmt.Errorf("pgcluster: restore %s into %s: %w", schema, c.Name, err)
	}
	return nil
}

// NextTransactionID returns the transaction id that the server at url
// hands out next.
func NextTransactionID(ctx context.Context, url string) (uint64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("pgcluster: next transaction id: %w", err)
	}
	defer conn.Close(ctx)
	var next uint64
	if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&next); err != nil {
		return 0, fmt.Errorf("pgcluster: next transaction id: %w", err)
	}
	return next, nil
}

// BurnTransactionIDs makes the server at url hand out transaction ids, one
// transaction each, until the next is at least until, so that a copy of
// its data lands in a server whose ids run well below those it holds.
func BurnTransactionIDs(ctx context.Context, url string, until uint64) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("pgcluster: burn transaction ids: %w", err)
	}
	defer conn.Close(ctx)
	for {
		var id uint64
		if err := conn.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&id); err != nil {
			return fmt.Errorf("pgcluster: burn transaction ids: %w", err)
		}
		if id+1 >= until {
			return nil
		}
	}
}
