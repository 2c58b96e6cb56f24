package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// eventStoreForeignTx is a [uow.Tx] of no backend.
type eventStoreForeignTx struct{}

func (eventStoreForeignTx) Now() time.Time { return time.Now() }

// TestEventStore checks what the PostgreSQL event store promises beyond the conformance suite: foreign transactions, open writers, stream locks and its indexes.
func TestEventStore(t *testing.T) {
	t.Parallel()
	t.Run("ForeignTx", testEventStoreForeignTx)
	t.Run("AppendBlockedByOpenTx", testEventStoreAppendBlockedByOpenTx)
	t.Run("AppendLaterBlockedByOpenTx", testEventStoreAppendLaterBlockedByOpenTx)
	t.Run("AppendLaterGoesWithTheCommit", testEventStoreAppendLaterGoesWithTheCommit)
	t.Run("RefusalsNameNothing", testEventStoreRefusalsNameNothing)
	t.Run("LockMakesWritersWait", testEventStoreLockMakesWritersWait)
	t.Run("LoadSinceUsesIndexes", testEventStoreLoadSinceUsesIndexes)
}

func testEventStoreForeignTx(t *testing.T) {
	t.Parallel()
	store := &postgres.EventStore{}
	ctx := t.Context()
	e, err := eventstore.NewEvent("test.happened", map[string]int{"n": 1}, eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Append(ctx, eventStoreForeignTx{}, "s", eventstore.Any, e)
	if !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("Append error = %v, want ErrForeignTx", err)
	}
	_, err = store.AppendLater(ctx, eventStoreForeignTx{}, "s", eventstore.NoStream, e)
	if !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("AppendLater error = %v, want ErrForeignTx", err)
	}
	_, err = store.Load(ctx, eventStoreForeignTx{}, "s", 0)
	if !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("Load error = %v, want ErrForeignTx", err)
	}
	_, err = store.ReadAll(ctx, eventStoreForeignTx{}, eventstore.Position{}, 10)
	if !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("ReadAll error = %v, want ErrForeignTx", err)
	}
	_, _, err = store.LoadSince(ctx, eventStoreForeignTx{}, "s", time.Now())
	if !errors.Is(err, uow.ErrForeignTx) {
		t.Errorf("LoadSince error = %v, want ErrForeignTx", err)
	}
}

// testEventStoreAppendBlockedByOpenTx makes an append wait on a row that an
// open transaction inserted, then lets that transaction commit, so that the
// append always takes the path where its insert skips a conflicting row.
func testEventStoreAppendBlockedByOpenTx(t *testing.T) {
	t.Parallel()
	first, err := eventstore.NewEvent("test.happened", map[string]int{"n": 1}, eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// second returns what the blocked unit of work appends, at version 0.
		second  func(t *testing.T) []eventstore.Event
		wantErr error
	}{
		{
			name: "a concurrent append wins",
			second: func(t *testing.T) []eventstore.Event {
				// Two events: the second one is inserted and must be removed.
				return []eventstore.Event{newEventForTest(t), newEventForTest(t)}
			},
			wantErr: eventstore.ErrConcurrency,
		},
		{
			name:   "a concurrent retry of the same events commits first",
			second: func(*testing.T) []eventstore.Event { return []eventstore.Event{first} },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			runner, store := db.Runner(nil), db.Events()
			second := tc.second(t)

			type result struct {
				events []eventstore.Event
				err    error
			}
			bResult := make(chan result, 1)
			err := blockOnOpenAppend(t, db, "s", first, func(ctx context.Context, tx uow.Tx) error {
				events, err := store.Append(ctx, tx, "s", eventstore.NoStream, second...)
				bResult <- result{events, err}
				return nil // Commit anyway: a failed append must leave nothing.
			})
			if err != nil {
				t.Fatalf("second unit of work: %v", err)
			}
			got := <-bResult
			if tc.wantErr != nil {
				if !errors.Is(got.err, tc.wantErr) {
					t.Fatalf("blocked append: error = %v, want %v", got.err, tc.wantErr)
				}
			} else if got.err != nil || len(got.events) != 1 || got.events[0].ID != first.ID || got.events[0].Version != 1 {
				t.Fatalf("blocked append returned %v, %v; want the first event at version 1", got.events, got.err)
			}

			var stored []eventstore.Event
			err = runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
				var err error
				stored, err = store.Load(ctx, tx, "s", 0)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(stored) != 1 || stored[0].ID != first.ID {
				t.Fatalf("stream holds %d events %v, want only the first", len(stored), stored)
			}
		})
	}
}

// testEventStoreAppendLaterGoesWithTheCommit counts the round trips of a
// unit of work that loads a stream and appends to it, in the statement
// spans of a traced pool: BEGIN with the load, then the append with the
// COMMIT (a statement that starts WITH), and nothing between.
func testEventStoreAppendLaterGoesWithTheCommit(t *testing.T) {
	t.Parallel()
	d := setupTracedDB(t)
	store := d.db.Events()
	err := d.db.Runner(nil).Do(d.ctx, func(ctx context.Context, tx uow.Tx) error {
		if _, err := store.Load(ctx, tx, "s", 0); err != nil {
			return err
		}
		_, err := store.AppendLater(ctx, tx, "s", eventstore.NoStream, newEventForTest(t), newEventForTest(t))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range d.statements() {
		names = append(names, s.Name())
	}
	if want := []string{"BEGIN; SELECT", "WITH; COMMIT"}; !slices.Equal(names, want) {
		t.Errorf("the unit of work's round trips are %q, want %q", names, want)
	}
}

// testEventStoreAppendLaterBlockedByOpenTx sends an AppendLater at commit
// while an open transaction holds the version or the ID it inserts, so
// that its INSERT waits for that one and then breaks the unique constraint:
// the version's is ErrConcurrency, the ID's ErrDuplicateEvent, and the
// unit of work writes nothing.
func testEventStoreAppendLaterBlockedByOpenTx(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		stream  string
		sameID  bool
		wantErr error
	}{
		{name: "the version is taken", stream: "s", wantErr: eventstore.ErrConcurrency},
		{name: "the ID is taken", stream: "other", sameID: true, wantErr: eventstore.ErrDuplicateEvent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			runner, store := db.Runner(nil), db.Events()
			first := newEventForTest(t)
			second := newEventForTest(t)
			if tc.sameID {
				second.ID = first.ID
			}
			err := blockOnOpenAppend(t, db, "s", first, func(ctx context.Context, tx uow.Tx) error {
				_, err := store.AppendLater(ctx, tx, tc.stream, eventstore.NoStream, second)
				return err
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("the unit of work of the blocked AppendLater: %v, want %v", err, tc.wantErr)
			}
			err = runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
				for stream, want := range map[string]int{"s": 1, "other": 0} {
					stored, err := store.Load(ctx, tx, stream, 0)
					if err != nil {
						return err
					}
					if len(stored) != want {
						t.Errorf("stream %s holds %d events, want %d", stream, len(stored), want)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// testEventStoreRefusalsNameNothing refuses held appends, under a version
// and under a condition, as sent after the stream moved and as sent while
// another transaction was inserting the same version: each fails its unit
// of work with ErrConcurrency, and the error PostgreSQL raised, which its
// log keeps, is no unique violation and names nothing of the stream or
// the event: neither the stream's name, nor the event's ID, nor its data.
func testEventStoreRefusalsNameNothing(t *testing.T) {
	t.Parallel()
	const stream = "signin-5ecre7"
	data := map[string]string{"email": "ada@example.com"}
	newEvent := func(t *testing.T) eventstore.Event {
		t.Helper()
		e, err := eventstore.NewEvent("test.link_requested", data, eventstore.Metadata{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	recent := eventstore.Condition{Since: time.Now().Add(-time.Hour), Fewer: 1}
	for _, tc := range []struct {
		name string
		// raced holds another transaction's insert of version 1 open
		// until the append waits for it; otherwise the stream has one
		// event when the append runs.
		raced  bool
		append func(ctx context.Context, store eventstore.Store, tx uow.Tx, e eventstore.Event) error
	}{
		{name: "AppendLater behind", append: func(ctx context.Context, store eventstore.Store, tx uow.Tx, e eventstore.Event) error {
			_, err := store.AppendLater(ctx, tx, stream, eventstore.NoStream, e)
			return err
		}},
		{name: "AppendLaterIf where the condition fails", append: func(ctx context.Context, store eventstore.Store, tx uow.Tx, e eventstore.Event) error {
			_, err := store.AppendLaterIf(ctx, tx, stream, recent, e, newEvent(t))
			return err
		}},
		{name: "AppendLater racing", raced: true, append: func(ctx context.Context, store eventstore.Store, tx uow.Tx, e eventstore.Event) error {
			_, err := store.AppendLater(ctx, tx, stream, eventstore.NoStream, e)
			return err
		}},
		{name: "AppendLaterIf racing", raced: true, append: func(ctx context.Context, store eventstore.Store, tx uow.Tx, e eventstore.Event) error {
			_, err := store.AppendLaterIf(ctx, tx, stream, eventstore.Condition{Fewer: 5}, e)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			runner, store := db.Runner(nil), db.Events()
			first, refused := newEvent(t), newEvent(t)
			b := func(ctx context.Context, tx uow.Tx) error { return tc.append(ctx, store, tx, refused) }
			var err error
			if tc.raced {
				err = blockOnOpenAppend(t, db, stream, first, b)
			} else {
				err = runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
					_, err := store.Append(ctx, tx, stream, eventstore.NoStream, first)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				err = runner.Do(t.Context(), b)
			}
			if !errors.Is(err, eventstore.ErrConcurrency) {
				t.Fatalf("the refused append's unit of work: %v, want ErrConcurrency", err)
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				t.Fatalf("the refused append's error %v holds no error of PostgreSQL's", err)
			}
			if pgErr.Code == "23505" {
				t.Errorf("PostgreSQL refused the append with a unique violation: %+v", *pgErr)
			}
			raised := fmt.Sprintf("%+v", *pgErr)
			for _, secret := range []string{stream, refused.ID.String(), "ada@example.com", "email"} {
				if strings.Contains(raised, secret) {
					t.Errorf("PostgreSQL's error names %q: %s", secret, raised)
				}
			}
		})
	}
}

// blockOnOpenAppend appends first to stream at NoStream in a unit of work
// A that it holds open, runs b in a unit of work B until B's backend waits
// for a lock (on A's rows), then lets A commit, and returns B's outcome.
func blockOnOpenAppend(t *testing.T, db *postgres.DB, stream string, first eventstore.Event, b func(ctx context.Context, tx uow.Tx) error) error {
	t.Helper()
	runner, store := db.Runner(nil), db.Events()
	release := make(chan struct{})
	releaseA := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseA) // Before pgtest's cleanup, which waits for connections.
	aAppended, aDone := make(chan error, 1), make(chan error, 1)
	go func() {
		aDone <- runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			_, err := store.Append(ctx, tx, stream, eventstore.NoStream, first)
			aAppended <- err
			<-release
			return err
		})
	}()
	if err := <-aAppended; err != nil {
		t.Fatalf("first append: %v", err)
	}
	pid, bDone := startReportingPID(t, runner, b)
	select {
	case p := <-pid:
		waitUntilLockWait(t, db, p)
	case err := <-bDone:
		t.Fatalf("second unit of work ended early: %v", err)
	}
	releaseA()
	if err := <-aDone; err != nil {
		t.Fatalf("first unit of work: %v", err)
	}
	return <-bDone
}

// startReportingPID runs fn in a unit of work of runner, in a goroutine,
// after sending its backend's process ID on pid; done receives its
// outcome.
func startReportingPID(t *testing.T, runner uow.Runner, fn func(ctx context.Context, tx uow.Tx) error) (pid <-chan uint32, done <-chan error) {
	p, d := make(chan uint32, 1), make(chan error, 1)
	go func() {
		d <- runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			ptx, err := postgres.PgxTx(tx)
			if err != nil {
				return err
			}
			var id uint32
			if err := ptx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&id); err != nil {
				return err
			}
			p <- id
			return fn(ctx, tx)
		})
	}()
	return p, d
}

// waitUntilLockWait waits until the backend with process ID pid waits for a
// lock, as an insert does on a key that an open transaction inserted.
func waitUntilLockWait(t *testing.T, db *postgres.DB, pid uint32) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for {
		var waiting bool
		err := db.Pool().QueryRow(t.Context(),
			`SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting)
		if err != nil {
			t.Fatalf("read pg_stat_activity: %v", err)
		}
		if waiting {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("backend %d never waited for a lock", pid)
		case <-poll.C:
		}
	}
}

func newEventForTest(t *testing.T) eventstore.Event {
	t.Helper()
	e, err := eventstore.NewEvent("test.happened", map[string]int{"n": 2}, eventstore.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Lock makes a second unit of work wait, inside PostgreSQL, until the one
// holding the stream ends.
func testEventStoreLockMakesWritersWait(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	store, runner := db.Events(), db.Runner(nil)
	locked, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	releaseA := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseA) // Before the database closes, on failure too.
	aDone := make(chan error, 1)
	go func() {
		aDone <- runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			if err := store.Lock(ctx, tx, "hot"); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	pid, bDone := startReportingPID(t, runner, func(ctx context.Context, tx uow.Tx) error {
		return store.Lock(ctx, tx, "hot")
	})
	waitUntilLockWait(t, db, <-pid)
	releaseA()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
}

// LoadSince reads neither the table nor the whole stream: PostgreSQL
// takes the head and the recent stretch from the primary key, walking
// back from the head no further than the first event before since, and no
// step of the plan reads more events than those and one more: fifteen
// minutes of one event a second are 901 events of the hot stream's 20000.
// It holds with statistics that describe the stream and with statistics
// made when the table was nearly empty, which make every stream look
// short: a plan that reads a whole stream because it looks short, as
// a generic plan made on short streams does, fails it.
func testEventStoreLoadSinceUsesIndexes(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := t.Context()
	now := time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)
	// One event a second: 20000 in the hot stream, up to now, and 50 in
	// each of 400 others.
	const fill = `
WITH s AS (INSERT INTO event_streams (name) SELECT unnest($3::text[]) RETURNING id)
INSERT INTO events (id, stream_id, version, type, data, recorded_at)
SELECT gen_random_uuid(), s.id, g, 'test.happened', '{}', $1::timestamptz - make_interval(secs => $2 - g)
FROM s, generate_series(1, $2) AS g`
	others := make([]string, 400)
	for i := range others {
		others[i] = fmt.Sprintf("other-%d", i)
	}
	if _, err := db.Pool().Exec(ctx, fill, now, 50, others); err != nil {
		t.Fatal(err)
	}
	// Statistics made before the hot stream: every stream looks 50
	// events long.
	if _, err := db.Pool().Exec(ctx, `ANALYZE events, event_streams`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, fill, now, 20000, []string{"hot"}); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `PREPARE load_since (text, timestamptz) AS `+postgres.LoadSinceQuery); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `DEALLOCATE load_since; RESET plan_cache_mode`) //nolint:errcheck // the connection goes with the test's database
	check := func(stats, planning string) {
		t.Helper()
		if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+planning); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			since  time.Time
			recent float64
		}{
			{"fifteen minutes of events", now.Add(-15 * time.Minute), 901},
			{"no recent event", now.Add(time.Minute), 0},
		} {
			what := fmt.Sprintf("%s, %s, %s", stats, planning, tc.name)
			var plan []byte
			// EXECUTE takes no parameters of its own: the time goes as a literal.
			explain := fmt.Sprintf(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE load_since ('hot', '%s')`, tc.since.Format(time.RFC3339Nano))
			err := conn.QueryRow(ctx, explain).Scan(&plan)
			if err != nil {
				t.Fatalf("%s: explain: %v", what, err)
			}
			var doc any
			if err := json.Unmarshal(plan, &doc); err != nil {
				t.Fatalf("%s: plan %s: %v", what, plan, err)
			}
			nodes, indexes := planNodes(doc)
			if slices.Contains(nodes, "Seq Scan on events") {
				t.Errorf("%s: the plan scans the table: %s", what, plan)
			}
			if !slices.Contains(indexes, "events_pkey") {
				t.Errorf("%s: the plan does not use events_pkey: %s", what, plan)
			}
			if n := planRead(doc, "events"); n > tc.recent+1 {
				t.Errorf("%s: a step of the plan read %.0f events, want at most the %.0f recent and one more: %s", what, n, tc.recent, plan)
			}
		}
	}
	for _, planning := range []string{"force_generic_plan", "force_custom_plan"} {
		check("statistics of short streams", planning)
	}
	if _, err := db.Pool().Exec(ctx, `ANALYZE events, event_streams`); err != nil {
		t.Fatal(err)
	}
	for _, planning := range []string{"force_generic_plan", "force_custom_plan"} {
		check("statistics of the hot stream", planning)
	}
}

// planMax returns the largest number under key at any depth of a plan of
// EXPLAIN (FORMAT JSON), or 0: of the nodes that read relation, or of
// every node when relation is "". The planning's figures are left out:
// its reads of the catalogs say nothing of the plan's.
func planMax(v any, key, relation string) float64 {
	var most float64
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			most = max(most, planMax(e, key, relation))
		}
	case map[string]any:
		if n, ok := v[key].(float64); ok && (relation == "" || v["Relation Name"] == relation) {
			most = n
		}
		for k, e := range v {
			if k != "Planning" {
				most = max(most, planMax(e, key, relation))
			}
		}
	}
	return most
}

// planRead returns the most rows that one node of a plan of EXPLAIN
// (ANALYZE, FORMAT JSON) read from relation over all its loops, those
// its filter removed included.
func planRead(v any, relation string) float64 {
	var most float64
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			most = max(most, planRead(e, relation))
		}
	case map[string]any:
		if v["Relation Name"] == relation {
			rows, _ := v["Actual Rows"].(float64)
			removed, _ := v["Rows Removed by Filter"].(float64)
			loops, _ := v["Actual Loops"].(float64)
			most = (rows + removed) * loops
		}
		for k, e := range v {
			if k != "Planning" {
				most = max(most, planRead(e, relation))
			}
		}
	}
	return most
}

// planNodes returns the node types and the index names of a plan of
// EXPLAIN (FORMAT JSON), at every depth; a node that reads a relation is
// named with it, as "Seq Scan on events".
func planNodes(v any) (nodes, indexes []string) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			n, i := planNodes(e)
			nodes, indexes = append(nodes, n...), append(indexes, i...)
		}
	case map[string]any:
		if s, ok := v["Node Type"].(string); ok {
			if r, ok := v["Relation Name"].(string); ok {
				s += " on " + r
			}
			nodes = append(nodes, s)
		}
		if s, ok := v["Index Name"].(string); ok {
			indexes = append(indexes, s)
		}
		for _, e := range v {
			n, i := planNodes(e)
			nodes, indexes = append(nodes, n...), append(indexes, i...)
		}
	}
	return nodes, indexes
}
