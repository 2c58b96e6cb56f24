package natsbroker_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/publish/natsbroker/natstest"
)

// BenchmarkPublish publishes CloudEvent-sized messages from many goroutines
// at once, as the relay's handlers do, to a server of the benchmark's own.
func BenchmarkPublish(b *testing.B) {
	srv := natstest.Start(b)
	p := newPublisherB(b, srv.URL)
	payload := `{"specversion":"1.0","id":"0190a3b1-0000-7000-8000-000000000001","source":"https://accounts.example.com","type":"user.signed_in","subject":"0190a3b1-0000-7000-8000-0000000000aa","time":"2031-03-04T05:06:07.123Z","datacontenttype":"application/json","data":{"user_id":"0190a3b1-0000-7000-8000-0000000000aa","version":5}}`
	b.SetParallelism(32)
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := p.Publish("accounts.user.signed_in", msg(ctx, uuid.NewString(), payload)); err != nil {
				b.Error(err)
			}
			cancel()
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
