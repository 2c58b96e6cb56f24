package postgres_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/postgres"
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

// BenchmarkEventStore measures units of work of the event store on a log
// of 100,000 events in 10,000 streams: an append of one event sent with
// the commit, as a command appends (AppendLater), to a stream that is new
// and to the head of a stream that has events; and a read of the log in
// windows of 500, as a rebuild reads it (ReadCommitted).
func BenchmarkEventStore(b *testing.B) {
	db := pgtest.New(b)
	store, runner := db.Events(), db.Runner(nil)
	ctx := b.Context()
	const streams, history = 10_000, 100_000
	versions := make([]int64, streams)
	at := time.Now()
	for first := 0; first < history; first += 1000 {
		err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			events := make([]eventstore.Event, 1000)
			for i := range events {
				n := first + i
				e, err := eventstore.NewEvent("bench.happened", map[string]int{"n": n}, eventstore.Metadata{CorrelationID: "req-" + strconv.Itoa(n), CausationID: "bench.Command"})
				if err != nil {
					return err
				}
				s := n % streams
				versions[s]++
				e.Stream, e.Version, e.RecordedAt = "bench-"+strconv.Itoa(s), versions[s], at
				events[i] = e
			}
			return postgres.LoadEvents(ctx, tx, events)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Pool().Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	appendOne := func(b *testing.B, stream string, expected eventstore.Expected) {
		b.Helper()
		err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			e, err := eventstore.NewEvent("bench.happened", map[string]int{"n": 1}, eventstore.Metadata{CorrelationID: "req", CausationID: "bench.Command"})
			if err != nil {
				return err
			}
			_, err = store.AppendLater(ctx, tx, stream, expected, e)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("append to a new stream", func(b *testing.B) {
		prefix := "new-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
		for i := 0; b.Loop(); i++ {
			appendOne(b, prefix+strconv.Itoa(i), eventstore.NoStream)
		}
	})
	b.Run("append to a stream", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			s := i % streams
			appendOne(b, "bench-"+strconv.Itoa(s), eventstore.Exactly(versions[s]))
			versions[s]++
		}
	})
	b.Run("read the log", func(b *testing.B) {
		var after eventstore.Position
		read := 0
		for b.Loop() {
			err := runner.Read(ctx, func(ctx context.Context, tx uow.Tx) error {
				events, err := store.ReadCommitted(ctx, tx, after, 500)
				if err != nil {
					return err
				}
				read += len(events)
				if len(events) < 500 {
					after = eventstore.Position{}
				} else {
					after = events[len(events)-1].Position
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "events/s")
	})
}
