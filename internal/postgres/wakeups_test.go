package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/outbox/relay"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
)

// These tests see a relay of another process as a second DB on the same
// schema: its in-process wake-ups reach only its own relays, so a wake-up
// that crosses from one DB to the other came through NOTIFY and LISTEN.

// TestWakeupsFromOtherProcesses checks the wake-ups that cross from one process to another through NOTIFY and LISTEN.
func TestWakeupsFromOtherProcesses(t *testing.T) {
	t.Parallel()
	t.Run("ListenAgain", testWakeupsListenAgain)
	t.Run("RelayHearsOtherProcessesAfterListenerEnded", testRelayHearsOtherProcessesAfterListenerEnded)
	t.Run("BurstOfCommitsNotifiesFewTimes", testBurstOfCommitsNotifiesFewTimes)
	t.Run("NotifierConnectsAgain", testNotifierConnectsAgain)
}

// testWakeupsListenAgain: when the backend of the listening connection is
// ended, Wakeups says so in a warning, listens again, and then hears the
// commits of another process.
func testWakeupsListenAgain(t *testing.T) {
	t.Parallel()
	warned := make(warnings, 10)
	db := pgtest.New(t, postgres.WithLogger(slog.New(warned)))
	other := sameSchema(t, db)

	wakeups := db.Outbox().Wakeups(t.Context())
	awaitWakeup(t, wakeups, "the wake-up sent once listening")
	pid := listenerPID(t, db)
	terminate(t, db, pid)

	select {
	case w := <-warned:
		if !strings.Contains(w, "57P01") {
			t.Errorf("warning %q, want one that gives the error (SQLSTATE 57P01)", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no warning within 10s of the listener's backend ending")
	}
	awaitWakeup(t, wakeups, "the wake-up sent once listening again")
	if again := listenerPID(t, db); again == pid {
		t.Fatalf("listening on backend %d still, the one ended", pid)
	}

	addOne(t, other.Runner(nil), other.Outbox(), 1)
	awaitWakeup(t, wakeups, "a wake-up after another process's commit")
}

// testRelayHearsOtherProcessesAfterListenerEnded: a relay that polls once
// an hour delivers a message that another process commits after the
// relay's listening backend was ended: only a wake-up can deliver it.
func testRelayHearsOtherProcessesAfterListenerEnded(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	other := sameSchema(t, db)
	spy := &wakeSpy{Outbox: db.Outbox().(*postgres.Outbox), woken: make(chan struct{}, 100)}
	delivered := make(chan outbox.Message, 10)
	rel, err := relay.New(spy, map[string]outbox.Handler{
		"test.wakeups": func(_ context.Context, m outbox.Message) error {
			delivered <- m
			return nil
		},
	}, outbox.RelayConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- rel.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	awaitWakeup(t, spy.woken, "the wake-up sent once listening")
	terminate(t, db, listenerPID(t, db))
	awaitWakeup(t, spy.woken, "the wake-up sent once listening again")

	addOne(t, other.Runner(nil), other.Outbox(), 7)
	select {
	case m := <-delivered:
		if string(m.Payload) != "7" {
			t.Errorf("delivered %s, want the message committed by the other process", m.Payload)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the message committed by another process was not delivered within 30s")
	}
}

// testBurstOfCommitsNotifiesFewTimes: commits made while a notification is
// in flight neither wait for it nor send one each; one notification is
// sent after them all.
func testBurstOfCommitsNotifiesFewTimes(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	listener := listenRaw(t, db)
	sending, release := make(chan struct{}), make(chan struct{})
	var sent atomic.Int64
	postgres.BeforeNotify(db, func() {
		if sent.Add(1) == 1 {
			close(sending)
			<-release
		}
	})
	runner, store := db.Runner(nil), db.Outbox()

	addOne(t, runner, store, 0)
	select {
	case <-sending:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification begun within 10s of a commit")
	}
	// The first notification is held back; the burst must not wait for it.
	const writers, each = 8, 8
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				addOne(t, runner, store, 1+w*each+i)
			}
		})
	}
	wg.Wait()
	if n := postgres.NotifyRequests(db); n != 1+writers*each {
		t.Errorf("%d commits asked for a notification, want %d", n, 1+writers*each)
	}
	close(release)

	// One notification for the first commit, one after the burst.
	for i := range 2 {
		n := awaitNotification(t, listener)
		if n.Channel != postgres.Channel(db) || n.Payload == "" {
			t.Errorf("notification %d: %+v, want one on %s that names its DB", i, n, postgres.Channel(db))
		}
	}
	if n := sent.Load(); n != 2 {
		t.Errorf("%d notifications sent for %d commits, want 2", n, 1+writers*each)
	}
}

// testNotifierConnectsAgain: when the backend that sends the notifications
// is ended, the next commit's notification goes out on a new connection.
func testNotifierConnectsAgain(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	listener := listenRaw(t, db)
	runner, store := db.Runner(nil), db.Outbox()

	addOne(t, runner, store, 0)
	first := awaitNotification(t, listener)
	terminate(t, db, int(first.PID))
	addOne(t, runner, store, 1)
	if again := awaitNotification(t, listener); again.PID == first.PID {
		t.Errorf("notified from backend %d again, the one ended", again.PID)
	}
}

// sameSchema opens a second DB on the schema of db, as another process
// would, closed when t ends.
func sameSchema(t *testing.T, db *postgres.DB) *postgres.DB {
	t.Helper()
	other, err := postgres.OpenConfig(t.Context(), db.Pool().Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	return other
}

// listenerPID returns the backend of the connection on which db's outbox
// listens.
func listenerPID(t *testing.T, db *postgres.DB) int {
	t.Helper()
	var pids []int
	rows, err := db.Pool().Query(t.Context(), `SELECT pid FROM pg_stat_activity
WHERE application_name = 'outbox-listen' AND query = 'LISTEN ' || quote_ident($1)`, postgres.Channel(db))
	if err == nil {
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int])
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 1 {
		t.Fatalf("%d backends listen on %s, want 1", len(pids), postgres.Channel(db))
	}
	return pids[0]
}

// terminate ends the server's backend pid, as an administrator or a
// restart would.
func terminate(t *testing.T, db *postgres.DB, pid int) {
	t.Helper()
	var ok bool
	if err := db.Pool().QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate backend %d: %v, %v", pid, ok, err)
	}
}

// listenRaw returns a connection of the test's own that listens on the
// channel of db's outbox.
func listenRaw(t *testing.T, db *postgres.DB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(t.Context(), db.Pool().Config().ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{postgres.Channel(db)}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// awaitNotification waits for the next notification on conn.
func awaitNotification(t *testing.T, conn *pgx.Conn) *pgconn.Notification {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return n
}

// wakeSpy is a store whose wake-ups the test sees too, as they reach the
// relay.
type wakeSpy struct {
	*postgres.Outbox
	woken chan struct{}
}

func (s *wakeSpy) Wakeups(ctx context.Context) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		defer close(out)
		for range s.Outbox.Wakeups(ctx) {
			s.woken <- struct{}{}
			select {
			case out <- struct{}{}:
			case <-ctx.Done():
			}
		}
	}()
	return out
}

// warnings is a slog.Handler that passes on each warning, with its error,
// as "message: error", dropping those that find the channel full.
type warnings chan string

func (w warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w warnings) Handle(_ context.Context, r slog.Record) error {
	text := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			text += ": " + a.Value.String()
		}
		return true
	})
	select {
	case w <- text:
	default:
	}
	return nil
}

func (w warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnings) WithGroup(string) slog.Handler      { return w }
