package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
)

// BenchmarkBookkeeping measures the relay's store calls for a batch of ten
// messages, a Claim and an AckAll, with the bookkeeping committed at
// synchronous=NORMAL ("relaxed", as the backend does) and at FULL, like a
// unit of work, which waits for a flush to disk at each commit.
func BenchmarkBookkeeping(b *testing.B) {
	for _, mode := range []struct {
		name    string
		relaxed bool
	}{{"relaxed", true}, {"full", false}} {
		b.Run(mode.name, func(b *testing.B) {
			db := sqlitetest.New(b)
			sqlite.SetRelaxedBookkeeping(db, mode.relaxed)
			store := db.Outbox()
			const batch = 10
			now := time.Now()
			// Every iteration claims and acknowledges one batch.
			msgs := make([]outbox.Message, 0, 500)
			for i := range b.N * batch {
				m, err := outbox.NewMessage("mail", map[string]int{"i": i}, now)
				if err != nil {
					b.Fatal(err)
				}
				msgs = append(msgs, m)
				if len(msgs) == cap(msgs) || i == b.N*batch-1 {
					err := db.Runner(nil).Do(b.Context(), func(ctx context.Context, tx uow.Tx) error {
						return store.Add(ctx, tx, msgs...)
					})
					if err != nil {
						b.Fatal(err)
					}
					msgs = msgs[:0]
				}
			}
			leases := make([]outbox.Lease, 0, batch)
			b.ResetTimer()
			for range b.N {
				at := now.Add(time.Second)
				got, err := store.Claim(b.Context(), at, time.Minute, batch)
				if err != nil {
					b.Fatal(err)
				}
				leases = leases[:0]
				for _, m := range got {
					leases = append(leases, outbox.LeaseOf(m, at, time.Minute))
				}
				if err := store.AckAll(b.Context(), leases); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkUnitOfWork measures a unit of work that adds one message: one
// commit at synchronous=FULL.
func BenchmarkUnitOfWork(b *testing.B) {
	db := sqlitetest.New(b)
	store, runner := db.Outbox(), db.Runner(nil)
	b.ResetTimer()
	for range b.N {
		if err := runner.Do(b.Context(), func(ctx context.Context, tx uow.Tx) error { return addMessage(ctx, store, tx) }); err != nil {
			b.Fatal(err)
		}
	}
}
