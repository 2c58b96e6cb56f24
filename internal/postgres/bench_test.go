package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/uow"
)

// BenchmarkBookkeeping measures the relay's store calls for one batch, a
// Claim and an AckAll of what it claimed, one after the other, with 50,000
// messages waiting.
func BenchmarkBookkeeping(b *testing.B) {
	for _, batch := range []int{10, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			db := pgtest.New(b)
			store := db.Outbox()
			now := time.Now()
			fill := func(n int) {
				for n > 0 {
					k := min(n, 1000)
					err := db.Runner(nil).Do(b.Context(), func(ctx context.Context, tx uow.Tx) error {
						msgs := make([]outbox.Message, k)
						for i := range msgs {
							m, err := outbox.NewMessage("mail", map[string]int{"i": i}, now)
							if err != nil {
								return err
							}
							msgs[i] = m
						}
						return store.Add(ctx, tx, msgs...)
					})
					if err != nil {
						b.Fatal(err)
					}
					n -= k
				}
			}
			fill(50000)
			leases := make([]outbox.Lease, 0, batch)
			b.ResetTimer()
			for i := range b.N {
				if i > 0 && i*batch%40000 == 0 {
					b.StopTimer()
					fill(40000)
					b.StartTimer()
				}
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
