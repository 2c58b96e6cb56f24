package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
)

// logConfig makes the suite's subscribers poll and deliver again at once.
var logConfig = sqlite.LogConfig{
	PollInterval:   5 * time.Millisecond,
	ResendInterval: 5 * time.Millisecond,
	RetryInterval:  5 * time.Millisecond,
	AckDeadline:    500 * time.Millisecond,
	BatchSize:      10,
}

// newLogSink makes the log suite's table, logtest_sink, on db.
func newLogSink(t *testing.T, db *sqlite.DB) logSink {
	t.Helper()
	if _, err := sqlite.WriteDB(db).ExecContext(t.Context(),
		`CREATE TABLE logtest_sink (seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	return logSink{runner: db.Runner(nil)}
}

// logSink is the suite's sink in the table logtest_sink.
type logSink struct{ runner uow.Runner }

// execer and querier are what the sink uses of this backend's [uow.Tx].
type (
	execer interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
	querier interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
)

func (s logSink) Record(ctx context.Context, tx uow.Tx, e eventstore.Event) error {
	x, ok := tx.(execer)
	if !ok {
		return fmt.Errorf("sink: %T is not a transaction of this backend", tx)
	}
	_, err := x.ExecContext(ctx, `INSERT INTO logtest_sink (event_id) VALUES (?)`, e.ID.String())
	return err
}

func (s logSink) Recorded(ctx context.Context) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	err := s.runner.Read(ctx, func(ctx context.Context, tx uow.Tx) error {
		rows, err := tx.(querier).QueryContext(ctx, `SELECT event_id FROM logtest_sink ORDER BY seq`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	return ids, err
}

// TestLog checks what the SQLite event log refuses beyond the conformance suite.
func TestLog(t *testing.T) {
	t.Parallel()
	t.Run("ApplyNeedsASubscribersContext", testLogApplyNeedsASubscribersContext)
	t.Run("SubscriberRefusals", testLogSubscriberRefusals)
}

// Apply runs nothing outside a subscriber's delivery: without its
// transaction there is nothing to commit fn's writes with.
func testLogApplyNeedsASubscribersContext(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	called := false
	msg := message.NewMessage(uuid.NewString(), []byte("{}"))
	msg.SetContext(t.Context())
	err := db.Log(logConfig).Apply(msg, time.Now(), func(context.Context, uow.Tx, []eventstore.Event) error {
		called = true
		return nil
	})
	if err == nil || called {
		t.Fatalf("Apply outside a delivery: error %v, fn called %v; want an error and fn not called", err, called)
	}
}

// The log has one topic, and a subscriber needs a group.
func testLogSubscriberRefusals(t *testing.T) {
	t.Parallel()
	log := sqlitetest.New(t).Log(logConfig)
	if _, err := log.Subscriber("", nil, nil); err == nil {
		t.Error("Subscriber with an empty group: no error")
	}
	sub, err := log.Subscriber("g.v1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := sub.Subscribe(t.Context(), "other"); err == nil {
		t.Errorf("Subscribe(%q): no error, want one: the log's topic is %q", "other", async.Topic)
	}
}
