package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/pgcluster"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// catchUp runs p until the log has nothing left for it, and returns its
// runner, stopped, whose metrics reader still reports it.
func catchUp(t *testing.T, log async.Log, p projections.Projection) (*async.Runner, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	r, err := async.NewRunner(log, []projections.Projection{p},
		async.WithRunnerMeter(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		n, _, err := log.Behind(t.Context(), projections.Group(p), p.Types())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the projection is still %d events behind", n)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return r, reader
}

// behindGauge returns what the runner's gauge of events behind reports.
func behindGauge(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == "projections.behind.events" && len(g.DataPoints) == 1 {
				return g.DataPoints[0].Value
			}
		}
	}
	t.Fatal("no gauge projections.behind.events")
	return 0
}

// insertEventAt adds an event of typ whose transaction id is txid, as a
// copy of the log from elsewhere, or a writer that knows no clock, would.
func insertEventAt(t *testing.T, db *postgres.DB, typ, txid string) {
	t.Helper()
	_, err := db.Pool().Exec(t.Context(), `
WITH s AS (INSERT INTO event_streams (name) VALUES ($3) RETURNING id)
INSERT INTO events (transaction_id, id, stream_id, version, type, data, recorded_at)
SELECT $1::text::xid8, $2, s.id, 1, $4, '{}', now() FROM s`, txid, uuid.New(), "s-"+uuid.NewString(), typ)
	if err != nil {
		t.Fatal(err)
	}
}

// TestLogicalRestore checks the event log after a logical copy of the database into another cluster: the clock that keeps its order, and the counts that stay honest when the order broke.
func TestLogicalRestore(t *testing.T) {
	t.Parallel()
	t.Run("BehindCountsWhatABrokenOrderHides", testBehindCountsWhatABrokenOrderHides)
	t.Run("TheClockMovesOn", testTheClockMovesOnAfterALogicalRestore)
	t.Run("ARebuildStopsOnEventsNoReaderReaches", testARebuildStopsOnEventsNoReaderReaches)
	t.Run("AnUpgradeOfACopyRunWithoutTheClockCountsWhatWasPassedOver", testAnUpgradeOfACopyRunWithoutTheClockCountsWhatWasPassedOver)
}

// A projection's lag is counted honestly when the log's order breaks: an
// event added below an offset that has passed its place, and one beyond
// the cluster's transaction ids, are counted as still to apply, by Behind
// and by the runner's gauge, and said to break the order.
func testBehindCountsWhatABrokenOrderHides(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	log := db.Log(postgres.LogConfig{PollInterval: 10 * time.Millisecond})
	p := recording{sink: newApplied(t, db), types: []string{"test.kept"}}
	appendEvents(t, db, "s-1", "test.kept", 3)
	appendEvents(t, db, "s-1", "test.other", 2)
	_, reader := catchUp(t, log, p)
	if n, _, err := log.Behind(t.Context(), projections.Group(p), p.Types()); n != 0 || err != nil {
		t.Fatalf("behind %d, %v once caught up", n, err)
	}

	insertEventAt(t, db, "test.kept", "1")
	insertEventAt(t, db, "test.other", "2")
	n, oldest, err := log.Behind(t.Context(), projections.Group(p), p.Types())
	if n != 1 || oldest.IsZero() || !errors.Is(err, projections.ErrLogOrder) || !strings.Contains(fmt.Sprint(err), "passed") {
		t.Errorf("an event below the offset: behind %d since %v, %v; want 1, and the order said broken", n, oldest, err)
	}

	var next uint64
	if err := db.Pool().QueryRow(t.Context(), `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&next); err != nil {
		t.Fatal(err)
	}
	insertEventAt(t, db, "test.kept", fmt.Sprint(next+1_000_000))
	n, _, err = log.Behind(t.Context(), projections.Group(p), p.Types())
	if n != 2 || !errors.Is(err, projections.ErrLogOrder) || !strings.Contains(fmt.Sprint(err), "beyond") {
		t.Errorf("and one beyond the cluster's ids: behind %d, %v; want 2, and the order said broken", n, err)
	}
	if got := behindGauge(t, reader); got != 2 {
		t.Errorf("the gauge of events behind says %d, want 2", got)
	}
}

// The start on a logical copy of the database in a cluster whose ids run
// lower (pg_dump and pg_restore here; logical replication, which copies no
// sequence, is played by resetting them): a role that may not move the
// clock is refused with the command that does; several instances starting
// at once move it once; the projections keep their offsets and what they
// applied; new events follow the copied ones, in the log and its
// sequences, and are delivered.
func testTheClockMovesOnAfterALogicalRestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	target, sourceURL, schema := copyFixture(t)

	src, err := postgres.Open(ctx, sourceURL)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	p := recording{sink: newApplied(t, src), types: []string{"test.kept"}}
	old := append(appendEvents(t, src, "s-1", "test.kept", 3), appendEvents(t, src, "s-2", "test.kept", 2)...)
	catchUp(t, src.Log(postgres.LogConfig{PollInterval: 10 * time.Millisecond}), p)
	addMessage(t, src, "k")
	addMessage(t, src, "k")
	const offsets = `SELECT string_agg(consumer_group || ' ' || last_transaction_id || ' ' || last_position, ', ') FROM projection_offsets`
	var before string
	if err := src.Pool().QueryRow(ctx, offsets).Scan(&before); err != nil {
		t.Fatal(err)
	}
	src.Close()

	if err := target.RestoreSchema(ctx, pgtest.URL(), schema, "postgres"); err != nil {
		t.Fatal(err)
	}
	targetURL := target.URL("postgres") + "&search_path=" + url.QueryEscape(schema)
	open := func(t *testing.T, url string, opts ...postgres.Option) *postgres.DB {
		t.Helper()
		db, err := postgres.Open(ctx, url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	admin := open(t, targetURL)
	for _, q := range []string{
		`ALTER TABLE events ALTER COLUMN position RESTART WITH 1`,
		`ALTER TABLE outbox_messages ALTER COLUMN seq RESTART WITH 1`,
		`CREATE ROLE tenant LOGIN`,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO tenant`,
		`GRANT ALL ON ALL TABLES IN SCHEMA ` + schema + ` TO tenant`,
		`GRANT ALL ON ALL SEQUENCES IN SCHEMA ` + schema + ` TO tenant`,
	} {
		if _, err := admin.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	t.Run("a role that may not move the clock is refused", func(t *testing.T) {
		tenant := open(t, strings.Replace(targetURL, "postgres://postgres@", "postgres://tenant@", 1))
		_, err := tenant.Migrate(ctx)
		if err == nil || !strings.Contains(err.Error(), "app migrate") {
			t.Fatalf("migrate as a role that owns nothing: %v, want an error that names the command", err)
		}
	})

	var logs [4]bytes.Buffer
	var wg sync.WaitGroup
	errs := make([]error, len(logs))
	dbs := make([]*postgres.DB, len(logs))
	for i := range logs {
		dbs[i] = open(t, targetURL, postgres.WithLogger(slog.New(slog.NewTextHandler(&logs[i], nil))))
	}
	for i, db := range dbs {
		wg.Go(func() { _, errs[i] = db.Migrate(ctx) })
	}
	wg.Wait()
	moved := 0
	for i := range logs {
		if errs[i] != nil {
			t.Errorf("start %d: %v", i, errs[i])
		}
		if strings.Contains(logs[i].String(), "came from another cluster") {
			moved++
		}
	}
	if moved != 1 {
		t.Errorf("%d of %d starts moved the clock, want 1", moved, len(logs))
	}
	db := dbs[0]
	var after string
	if err := db.Pool().QueryRow(ctx, offsets).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("offsets after the start on the copy: %s, want %s", after, before)
	}

	log := db.Log(postgres.LogConfig{PollInterval: 10 * time.Millisecond})
	p.sink = applied{db}
	if n, _, err := log.Behind(ctx, projections.Group(p), p.Types()); n != 0 || err != nil {
		t.Errorf("behind %d, %v on the copy before anything new, want 0", n, err)
	}
	added := appendEvents(t, db, "s-3", "test.kept", 2)
	mail := addMessage(t, db, "k")
	if n, _, err := log.Behind(ctx, projections.Group(p), p.Types()); n != 2 || err != nil {
		t.Errorf("behind %d, %v with two new events, want 2", n, err)
	}
	var all []eventstore.Event
	err = db.Runner(nil).Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		all, err = db.Events().ReadAll(ctx, tx, eventstore.Position{}, 100)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eventIDs(all), append(old, added...); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the log on the copy reads %v, want the copied events, then the new ones: %v", got, want)
	}
	if len(all) == len(old)+len(added) && all[len(old)].Position.Seq <= all[len(old)-1].Position.Seq {
		t.Errorf("a new event took position %d, below the copied ones' %d", all[len(old)].Position.Seq, all[len(old)-1].Position.Seq)
	}
	var seqs string
	if err := db.Pool().QueryRow(ctx, `SELECT string_agg(id::text, ',' ORDER BY seq) FROM outbox_messages`).Scan(&seqs); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(seqs, mail.String()) {
		t.Errorf("the outbox in order of seq: %s; the new message %s must come last", seqs, mail)
	}
	catchUp(t, log, p)
	got, err := p.sink.Recorded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(append(old, added...)) {
		t.Errorf("the projection holds %v, want the copied events once and then the new ones", got)
	}

	t.Run("and a copy of the copy", func(t *testing.T) {
		third := pgcluster.New(t)
		if err := third.RestoreSchema(ctx, target.URL("postgres"), schema, "postgres"); err != nil {
			t.Fatal(err)
		}
		db := open(t, third.URL("postgres")+"&search_path="+url.QueryEscape(schema))
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		more := appendEvents(t, db, "s-4", "test.kept", 1)
		var all []eventstore.Event
		err := db.Runner(nil).Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			var err error
			all, err = db.Events().ReadAll(ctx, tx, eventstore.Position{}, 100)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want := append(append(append([]uuid.UUID(nil), old...), added...), more...)
		if got := eventIDs(all); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the log on the second copy reads %v, want %v", got, want)
		}
	})
}

// addMessage adds a message of key to db's outbox and returns its ID.
func addMessage(t *testing.T, db *postgres.DB, key string) uuid.UUID {
	t.Helper()
	m := outbox.Message{ID: uuid.New(), Topic: "test.topic", Payload: []byte(`{}`), CreatedAt: time.Now(), Key: key}
	err := db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		return db.Outbox().Add(ctx, tx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

func eventIDs(events []eventstore.Event) []uuid.UUID {
	ids := make([]uuid.UUID, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	return ids
}

// A rebuild stops, and says why, when the log holds events that no reader
// reaches, instead of waiting for them for ever.
func testARebuildStopsOnEventsNoReaderReaches(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	var next uint64
	if err := db.Pool().QueryRow(t.Context(), `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&next); err != nil {
		t.Fatal(err)
	}
	insertEventAt(t, db, user.TypeRegistered, fmt.Sprint(next+1_000_000))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log := db.Log(postgres.LogConfig{PollInterval: 10 * time.Millisecond})
	_, _, err := async.Renew(ctx, log, user.ActivityProjection{Store: db.ActivityStore(), Log: db.Log(postgres.LogConfig{}), Keys: nil}, nil)
	if !errors.Is(err, projections.ErrLogOrder) || ctx.Err() != nil {
		t.Fatalf("rebuild: %v, want it stopped at once on the order", err)
	}
}

// A copy that a release without the clock ran on before the upgrade: its
// new events sort among the copied ones, below the offset, where no
// subscriber reads. The upgrade counts them as passed over, and says so,
// instead of counting them as applied.
func testAnUpgradeOfACopyRunWithoutTheClockCountsWhatWasPassedOver(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	target, sourceURL, schema := copyFixture(t)
	src, err := postgres.Open(ctx, sourceURL)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const before = 13 // the last migration without the clock
	if err := src.MigrateTo(ctx, before); err != nil {
		t.Fatal(err)
	}
	// As that release appended them: one unit of work, and the columns
	// the events table had then.
	if _, err := src.Pool().Exec(ctx, `INSERT INTO events (id, stream, version, type, data, recorded_at)
SELECT gen_random_uuid(), 's-1', v, 'test.kept', '{}', now() FROM generate_series(1, 3) AS v`); err != nil {
		t.Fatal(err)
	}
	p := recording{types: []string{"test.kept"}}
	if _, err := src.Pool().Exec(ctx, `INSERT INTO projection_offsets (consumer_group, last_transaction_id, last_position)
SELECT $1, transaction_id, position FROM events ORDER BY transaction_id DESC, position DESC LIMIT 1`, projections.Group(p)); err != nil {
		t.Fatal(err)
	}
	src.Close()
	if err := target.RestoreSchema(ctx, pgtest.URL(), schema, "postgres"); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, target.URL("postgres")+"&search_path="+url.QueryEscape(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// As the release before writes them.
	if _, err := db.Pool().Exec(ctx, `INSERT INTO events (id, stream, version, type, data, recorded_at)
SELECT gen_random_uuid(), 's-2', v, 'test.kept', '{}', now() FROM generate_series(1, 2) AS v`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	n, _, err := db.Log(postgres.LogConfig{}).Behind(ctx, projections.Group(p), p.Types())
	if n != 2 || !errors.Is(err, projections.ErrLogOrder) {
		t.Errorf("behind %d, %v; want the 2 events passed over, and the order said broken", n, err)
	}
}

// copyFixture returns a new cluster to restore into, the URL of a new
// schema on the tests' server to copy from, and that schema's name; the
// server's transaction ids run 3,000 above the cluster's.
func copyFixture(t *testing.T) (target *pgcluster.Cluster, sourceURL, schema string) {
	t.Helper()
	target = pgcluster.New(t)
	sourceURL = pgtest.NewURL(t)
	u, err := url.Parse(sourceURL)
	if err != nil {
		t.Fatal(err)
	}
	next, err := pgcluster.NextTransactionID(t.Context(), target.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pgcluster.BurnTransactionIDs(t.Context(), pgtest.URL(), next+3000); err != nil {
		t.Fatal(err)
	}
	return target, sourceURL, u.Query().Get("search_path")
}
