package pgcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/pgcluster"
)

// A cluster answers, keeps its data across a crash and a restart, and
// is gone once dropped.
func TestClusterLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dropped := false
	t.Cleanup(func() {
		if !dropped {
			_ = c.Drop(context.Background())
		}
	})
	query := func(sql string) (int, error) {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err != nil {
			return 0, err
		}
		defer conn.Close(ctx)
		var n int
		err = conn.QueryRow(ctx, sql).Scan(&n)
		return n, err
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept AS SELECT 42 AS n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)

	if err := c.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := query("SELECT 1"); err == nil {
		t.Fatal("a crashed cluster still answers")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := query("SELECT n FROM kept"); err != nil || n != 42 {
		t.Fatalf("after a crash and a restart the table reads %d, %v; want 42", n, err)
	}

	if err := c.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	dropped = true
	if _, err := query("SELECT 1"); err == nil {
		t.Fatal("a dropped cluster still answers")
	}
}
