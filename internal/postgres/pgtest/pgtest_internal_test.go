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
	admin, err := pgx.Connect(ctx, URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize())
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
