package sqlite_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/migrations"
)

// open opens the file at path and closes it when t ends.
func open(t *testing.T, path string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// pragma returns the value of PRAGMA name on the write connection.
func pragma(t *testing.T, db *sqlite.DB, name string) string {
	t.Helper()
	var v string
	if err := sqlite.WriteDB(db).QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOpen checks how a database file is opened: what it keeps across a reopen, the synchronous setting the writers get, and where and with which permissions it may be created.
func TestOpen(t *testing.T) {
	t.Parallel()
	t.Run("DurableAcrossReopen", testDurableAcrossReopen)
	t.Run("BookkeepingRestoresFullSync", testBookkeepingRestoresFullSync)
	t.Run("CreatesTheFileButNotItsFolder", testOpenCreatesTheFileButNotItsFolder)
	t.Run("CreatesAFileOnlyItsOwnerReads", testOpenCreatesAFileOnlyItsOwnerReads)
}

// What a unit of work committed is in the file: closed and opened again,
// the database has it, and the file is in WAL mode.
func testDurableAcrossReopen(t *testing.T) {
	t.Parallel()
	// A name that a DSN would misread, had the path not been escaped.
	path := filepath.Join(t.TempDir(), "accounts?mode=memory#1.db")
	db := open(t, path)
	applied, err := db.Migrate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := everyMigration(t); !slices.Equal(applied, want) {
		t.Fatalf("Migrate applied %v, want every migration, %v", applied, want)
	}
	e, err := eventstore.NewEvent("test.happened", map[string]string{"k": "v"}, eventstore.Metadata{CorrelationID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := outbox.NewMessage("mail", "hi", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	err = db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		if _, err := db.Events().Append(ctx, tx, "s", eventstore.NoStream, e); err != nil {
			return err
		}
		return db.Outbox().Add(ctx, tx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database file: %v", err)
	}

	db = open(t, path)
	if applied, err := db.Migrate(t.Context()); err != nil || len(applied) != 0 {
		t.Errorf("Migrate of a migrated file applied %v, %v; want nothing", applied, err)
	}
	if mode := pragma(t, db, "journal_mode"); mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	if sync := pragma(t, db, "synchronous"); sync != "2" {
		t.Errorf("synchronous = %s, want 2 (FULL)", sync)
	}
	err = db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		got, err := db.Events().Load(ctx, tx, "s", 0)
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].ID != e.ID || got[0].Metadata.CorrelationID != "c" {
			t.Errorf("after reopening, stream s holds %+v, want event %s", got, e.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := db.Outbox().Lookup(t.Context(), m.ID)
	if err != nil {
		t.Fatalf("after reopening, Lookup of the message: %v", err)
	}
	if !rec.CreatedAt.Equal(m.CreatedAt) {
		t.Errorf("after reopening, the message was created at %v, want %v", rec.CreatedAt, m.CreatedAt)
	}
}

// The relay's bookkeeping commits with synchronous=NORMAL but hands the
// write connection back at FULL, for the units of work.
func testBookkeepingRestoresFullSync(t *testing.T) {
	t.Parallel()
	db := open(t, filepath.Join(t.TempDir(), "a.db"))
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	addOne(t, db.Runner(nil), db.Outbox())
	if n := claimable(t, db.Outbox()); n != 1 {
		t.Fatalf("claimed %d messages, want 1", n)
	}
	if sync := pragma(t, db, "synchronous"); sync != "2" {
		t.Errorf("synchronous after a claim = %s, want 2 (FULL)", sync)
	}
}

// testOpenCreatesAFileOnlyItsOwnerReads: the file, its WAL and its shared
// memory file have no permission for the group or others, whatever the
// umask lets a new file have (022 in the tests, as on most machines).
func testOpenCreatesAFileOnlyItsOwnerReads(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	db := open(t, path)
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	addOne(t, db.Runner(nil), db.Outbox())
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v, want none for the group or others", filepath.Base(name), perm)
		}
	}
}

func testOpenCreatesTheFileButNotItsFolder(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "missing")
	db, err := sqlite.Open(t.Context(), filepath.Join(dir, "a.db"))
	if err == nil {
		db.Close()
		t.Fatal("Open in a missing folder succeeded, want an error")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open made the folder: %v", err)
	}
	if _, err := sqlite.Open(t.Context(), ""); err == nil {
		t.Error("Open of an empty path succeeded, want an error")
	}
}

// TestMigrate checks the migrations of a file: instances that migrate at once, a new release's, and what a migration does to the data.
func TestMigrate(t *testing.T) {
	t.Parallel()
	t.Run("Concurrent", testConcurrentMigrations)
	t.Run("ConcurrentOfANewRelease", testConcurrentMigrationsOfANewRelease)
	t.Run("DropsSignInStreamsNamedByAddress", testMigrationDropsSignInStreamsNamedByAddress)
}

// Instances that start together all migrate at once: they take turns on
// the file's write lock, one applies each migration and the others find
// nothing to do.
func testConcurrentMigrations(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	const n = 4
	type result struct {
		applied []int64
		err     error
	}
	results := make(chan result, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			db, err := sqlite.Open(t.Context(), path)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer db.Close()
			applied, err := db.Migrate(t.Context())
			results <- result{applied, err}
		}()
	}
	close(start)
	var all []int64
	for range n {
		r := <-results
		if r.err != nil {
			t.Error(r.err)
		}
		all = append(all, r.applied...)
	}
	slices.Sort(all)
	if want := everyMigration(t); !slices.Equal(all, want) {
		t.Errorf("the migrations applied %v in all, want each migration once, %v", all, want)
	}
	// The schema is complete.
	db := open(t, path)
	addOne(t, db.Runner(nil), db.Outbox())
}

// A new release with new migrations starts several instances on a file that
// an older release migrated: they all see the new migrations pending, take
// turns, and each new migration is applied once.
func testConcurrentMigrationsOfANewRelease(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	migration := func(table string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("-- +goose Up\nCREATE TABLE " + table + " (id INTEGER PRIMARY KEY);\n" +
			"INSERT INTO " + table + " (id) VALUES (1);\n-- +goose Down\nDROP TABLE " + table + ";\n")}
	}
	older := fstest.MapFS{"00001_one.sql": migration("one")}
	newer := fstest.MapFS{
		"00001_one.sql":   migration("one"),
		"00002_two.sql":   migration("two"),
		"00003_three.sql": migration("three"),
	}
	if applied, err := sqlite.MigrateFS(t.Context(), open(t, path), older); err != nil || !slices.Equal(applied, []int64{1}) {
		t.Fatalf("the older release applied %v, %v; want [1]", applied, err)
	}

	const n = 8
	type result struct {
		applied []int64
		err     error
	}
	results := make(chan result, n)
	start := make(chan struct{})
	for range n {
		go func() {
			db, err := sqlite.Open(t.Context(), path)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer db.Close()
			<-start
			applied, err := sqlite.MigrateFS(t.Context(), db, newer)
			results <- result{applied, err}
		}()
	}
	close(start)
	var all []int64
	for range n {
		r := <-results
		if r.err != nil {
			t.Error(r.err)
		}
		all = append(all, r.applied...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int64{2, 3}) {
		t.Errorf("the instances applied %v in all, want each of [2 3] once", all)
	}
}

// everyMigration returns the versions of the SQLite migrations, in order,
// from their file names (NNNNN_description.sql).
func everyMigration(t *testing.T) []int64 {
	t.Helper()
	names, err := fs.Glob(migrations.Sqlite(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var versions []int64
	for _, name := range names {
		v, err := strconv.ParseInt(name[:5], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", name, err)
		}
		versions = append(versions, v)
	}
	slices.Sort(versions)
	return versions
}

// Migration 00013 deletes the sign-in streams named by an address, which
// a release before the sealing of addresses wrote, and keeps those named
// by a hash and every other stream.
func testMigrationDropsSignInStreamsNamedByAddress(t *testing.T) {
	t.Parallel()
	db := open(t, filepath.Join(t.TempDir(), "a.db"))
	before := fstest.MapFS{}
	names, err := fs.Glob(migrations.Sqlite(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if name < "00013" {
			data, err := fs.ReadFile(migrations.Sqlite(), name)
			if err != nil {
				t.Fatal(err)
			}
			before[name] = &fstest.MapFile{Data: data}
		}
	}
	if _, err := sqlite.MigrateFS(t.Context(), db, before); err != nil {
		t.Fatal(err)
	}
	streams := []string{"signin-ada@example.com", "signin-0123456789abcdef0123456789abcdef", "user-0190a3b1-0000-7000-8000-000000000000"}
	// As that release appended them, in the columns the table had then.
	for _, stream := range streams {
		_, err := sqlite.WriteDB(db).ExecContext(t.Context(), `INSERT INTO events (id, stream, version, type, data, recorded_at)
VALUES (?, ?, 1, 'test.event', '{"email":"ada@example.com"}', 0)`, uuid.NewString(), stream)
		if err != nil {
			t.Fatal(err)
		}
	}
	if applied, err := db.Migrate(t.Context()); err != nil || !slices.Contains(applied, 13) {
		t.Fatalf("Migrate applied %v, %v; want 00013 among them", applied, err)
	}
	err = db.Runner(nil).Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		for i, stream := range streams {
			events, err := db.Events().Load(ctx, tx, stream, 0)
			if err != nil {
				return err
			}
			if want := min(i, 1); len(events) != want {
				t.Errorf("stream %s holds %d events after the migration, want %d", stream, len(events), want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
