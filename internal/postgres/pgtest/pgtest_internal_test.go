package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A server without the tests' database gets it: the first call creates
// it, a second finds it.
func TestEnsureDatabaseCreatesAMissingOne(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(DefaultURL)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("pgtest_missing_%d", time.Now().UnixNano())
	u.Path = "/" + name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, URL())
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
		var left bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&left); err != nil || left {
			t.Errorf("database %s is still there (%v)", name, err)
		}
	})
	for range 2 {
		if err := ensureDatabase(ctx, u.String()); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("the database was not created: %v", err)
	}
	_ = conn.Close(ctx)
}
