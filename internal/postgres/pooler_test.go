package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgbouncertest"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// poolers are the modes of PgBouncer the tests run the backend behind.
var poolers = []postgres.Pooler{postgres.PoolerSession, postgres.PoolerTransaction}

// openBehind opens the database at rawURL, a URL of [pgtest.NewURL],
// through bouncer, and fails t when it cannot.
func openBehind(t *testing.T, bouncer *pgbouncertest.Server, rawURL string, opts ...postgres.Option) *postgres.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	db, err := postgres.Open(ctx, bouncer.URL(t, rawURL), append([]postgres.Option{postgres.WithPooler(bouncer.Mode)}, opts...)...)
	if err != nil {
		t.Fatalf("open through pgbouncer (%s): %v", bouncer.Mode, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestPgBouncer runs the backend behind a stock PgBouncer: units of work, migrations, wake-ups and scratch databases.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	t.Run("EachMode", testBehindPgBouncer)
	t.Run("Wakeups", testWakeupsBehindPgBouncer)
	t.Run("ScratchRefusesAPoolerThatDropsItsSchema", testScratchRefusesAPoolerThatDropsItsSchema)
	t.Run("UnitsOfWorkBehindATransactionPooler", testUnitsOfWorkBehindATransactionPooler)
}

// testBehindPgBouncer runs the backend through a stock PgBouncer in each
// mode: instances migrate at once and work in their schema, the relay's
// claims see its settings, and no setting or lock of theirs stays on the
// pooler's server connections for its other clients.
func testBehindPgBouncer(t *testing.T) {
	t.Parallel()
	for _, mode := range poolers {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			// In transaction mode two server connections: the migrations'
			// lock holds one while they run on the other, and another
			// client lands on a connection the instances used.
			var opts []pgbouncertest.Option
			if mode == postgres.PoolerTransaction {
				opts = append(opts, pgbouncertest.PoolSize(2))
			}
			bouncer := pgbouncertest.Start(t, mode, pgtest.URL(), opts...)
			raw := pgtest.NewURL(t)
			schema := schemaOf(t, raw)

			// Three instances start at once on an empty schema.
			dbs := make([]*postgres.DB, 3)
			var wg sync.WaitGroup
			errs := make([]error, len(dbs))
			for i := range dbs {
				dbs[i] = openBehind(t, bouncer, raw)
				wg.Go(func() { _, errs[i] = dbs[i].Migrate(t.Context()) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("instance %d: migrate: %v", i, err)
				}
			}
			db := dbs[0]
			if err := db.CheckSchema(t.Context(), schema); err != nil {
				t.Fatal(err)
			}

			// A unit of work, then the relay's claim and acknowledgement.
			addOne(t, db.Runner(nil), db.Outbox(), 1)
			got, err := dbs[1].Outbox().Claim(t.Context(), time.Now().Add(time.Second), time.Minute, 10)
			if err != nil || len(got) != 1 {
				t.Fatalf("claim through the pooler: %v, %v; want the one message", got, err)
			}
			if err := dbs[1].Outbox().Ack(t.Context(), got[0].ID); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"enable_sort": "off", "enable_bitmapscan": "off", "synchronous_commit": "off", "search_path": schema}
			if got := postgres.RelaySettings(t, db); !equal(got, want) {
				t.Errorf("the relay's statements run with %v, want %v", got, want)
			}

			// Another client of the pooler, once the instances have gone,
			// finds the server's defaults on the connections they used.
			for _, db := range dbs {
				db.Close()
			}
			other, err := pgx.Connect(t.Context(), bouncer.URL(t, pgtest.URL()))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close(context.Background())
			for range 5 {
				var sort, bitmap, commit, path string
				if err := other.QueryRow(t.Context(), `SELECT current_setting('enable_sort'), current_setting('enable_bitmapscan'),
current_setting('synchronous_commit'), current_setting('search_path')`, pgx.QueryExecModeSimpleProtocol).Scan(&sort, &bitmap, &commit, &path); err != nil {
					t.Fatal(err)
				}
				if sort != "on" || bitmap != "on" || commit != "on" || strings.Contains(path, schema) {
					t.Fatalf("another client of the pooler gets enable_sort=%s enable_bitmapscan=%s synchronous_commit=%s search_path=%s: the app's settings leaked",
						sort, bitmap, commit, path)
				}
			}
			var locks int
			if err := other.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
AND ((classid::int8 << 32) | objid::int8) = $1`, pgx.QueryExecModeSimpleProtocol, postgres.MigrationLockID(schema)).Scan(&locks); err != nil {
				t.Fatal(err)
			}
			if locks != 0 {
				t.Errorf("%d advisory locks of the migrations are still held after they ran", locks)
			}
		})
	}
}

// testWakeupsBehindPgBouncer: a commit of one instance wakes the relays of
// another at once, through the pooler in session mode and through the
// direct listen URL in transaction mode; in transaction mode without it,
// the DB says it cannot listen.
func testWakeupsBehindPgBouncer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mode   postgres.Pooler
		listen bool
	}{{postgres.PoolerSession, false}, {postgres.PoolerTransaction, true}, {postgres.PoolerTransaction, false}} {
		name := string(c.mode)
		if c.listen {
			name += " with listen URL"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bouncer := pgbouncertest.Start(t, c.mode, pgtest.URL())
			raw := pgtest.NewURL(t)
			var opts []postgres.Option
			if c.listen {
				opts = append(opts, postgres.WithListenURL(raw))
			}
			db := openBehind(t, bouncer, raw, opts...)
			if _, err := db.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			other := openBehind(t, bouncer, raw)
			if want := c.mode == postgres.PoolerSession || c.listen; db.Listening() != want {
				t.Fatalf("Listening() = %v, want %v", db.Listening(), want)
			}
			if !db.Listening() {
				return
			}
			wakeups := db.Outbox().Wakeups(t.Context())
			awaitWakeup(t, wakeups, "the wake-up sent once listening")
			addOne(t, other.Runner(nil), other.Outbox(), 1)
			awaitWakeup(t, wakeups, "a wake-up after another instance's commit")
		})
	}
}

// testScratchRefusesAPoolerThatDropsItsSchema: behind a pooler told to
// drop the parameters it cannot pass on, and a DB not told of the pooler,
// a scratch database would work in the database's own schema; it refuses,
// having written nothing.
func testScratchRefusesAPoolerThatDropsItsSchema(t *testing.T) {
	t.Parallel()
	bouncer := pgbouncertest.Start(t, postgres.PoolerSession, pgtest.URL(), pgbouncertest.Ignore("search_path", "enable_sort", "enable_bitmapscan", "synchronous_commit"))
	app := pgtest.NewURL(t)
	ctx := t.Context()
	_, _, err := postgres.OpenScratch(ctx, bouncer.URL(t, app), "test_")
	if err == nil || !strings.Contains(err.Error(), "search_path") {
		t.Fatalf("OpenScratch through a pooler that drops search_path: %v, want an error that names it", err)
	}
	// Told of the pooler, it works in its own schema.
	db, drop, err := postgres.OpenScratch(ctx, bouncer.URL(t, app), "test_", postgres.WithPooler(postgres.PoolerSession))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := drop(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	}()
	if !strings.HasPrefix(db.Schema(), "test_") {
		t.Errorf("the scratch DB works in %q", db.Schema())
	}
	var tables int
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname IN ('public', $1)`, schemaOf(t, app)).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("%d tables in the database's own schemas, want none", tables)
	}
}

// testUnitsOfWorkBehindATransactionPooler: a read-only unit of work and
// the event log's database/sql work in the schema of the URL too.
func testUnitsOfWorkBehindATransactionPooler(t *testing.T) {
	t.Parallel()
	bouncer := pgbouncertest.Start(t, postgres.PoolerTransaction, pgtest.URL())
	raw := pgtest.NewURL(t)
	db := openBehind(t, bouncer, raw)
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	schema := schemaOf(t, raw)
	var got string
	err := db.Runner(nil).Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		q, err := postgres.PgxTx(tx)
		if err != nil {
			return err
		}
		return q.QueryRow(ctx, `SELECT current_schema()`).Scan(&got)
	})
	if err != nil || got != schema {
		t.Fatalf("a read-only unit of work works in %q (%v), want %q", got, err, schema)
	}
}

// schemaOf returns the search_path of a URL of [pgtest.NewURL].
func schemaOf(t *testing.T, rawURL string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.RuntimeParams["search_path"]
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
