package soak

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// sample is what the soak saw at one moment. A value it could not read is
// NaN (an instance down, the database away).
type sample struct {
	at time.Time
	// rss is each instance's resident memory in MiB.
	rss []float64
	// Table sizes in MiB (with indexes and TOAST; the events' with their
	// streams') and dead tuples.
	outboxMiB, eventsMiB   float64
	outboxDead, eventsDead float64
	// pending is the outbox messages not delivered yet.
	pending float64
	// p50 and p99 are the latencies in ms of the answers since the last
	// sample.
	p50, p99 float64
}

type mark struct {
	name      string
	from, due time.Time
}

// sampler samples every interval until its context ends.
type sampler struct {
	url       string
	instances []*instance
	client    *client
	every     time.Duration

	mu      sync.Mutex
	samples []sample
	marks   []mark
}

func newSampler(url string, instances []*instance, c *client, every time.Duration) *sampler {
	return &sampler{url: url, instances: instances, client: c, every: every}
}

func (s *sampler) mark(name string, from, to time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks = append(s.marks, mark{name: name, from: from, due: to})
}

func (s *sampler) run(ctx context.Context, began time.Time) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		x := sample{at: time.Now(), outboxMiB: math.NaN(), eventsMiB: math.NaN(), outboxDead: math.NaN(),
			eventsDead: math.NaN(), pending: math.NaN(), p50: math.NaN(), p99: math.NaN()}
		for _, in := range s.instances {
			v := math.NaN()
			if b := in.rss(); b > 0 {
				v = float64(b) / (1 << 20)
			}
			x.rss = append(x.rss, v)
		}
		if conn == nil || conn.IsClosed() {
			c, err := pgx.Connect(ctx, s.url)
			if err == nil {
				conn = c
			}
		}
		if conn != nil {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var ob, ev, od, ed, pend int64
			err := conn.QueryRow(qctx, `SELECT pg_total_relation_size('outbox_messages'), pg_total_relation_size('events') + pg_total_relation_size('event_streams'),
				(SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'outbox_messages'),
				(SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'events'),
				(SELECT count(*) FROM outbox_messages WHERE buried_at IS NULL)`).Scan(&ob, &ev, &od, &ed, &pend)
			cancel()
			if err == nil {
				x.outboxMiB, x.eventsMiB = float64(ob)/(1<<20), float64(ev)/(1<<20)
				x.outboxDead, x.eventsDead, x.pending = float64(od), float64(ed), float64(pend)
			} else {
				_ = conn.Close(context.Background())
				conn = nil
			}
		}
		if ls := s.client.ledger.takeLatencies(); len(ls) > 0 {
			d := make([]time.Duration, len(ls))
			for i, l := range ls {
				d[i] = l.took
			}
			x.p50, x.p99 = ms(quantile(d, 0.50)), ms(quantile(d, 0.99))
		}
		s.mu.Lock()
		s.samples = append(s.samples, x)
		s.mu.Unlock()
	}
}

func (s *sampler) all() ([]sample, []mark) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slicesClone(s.samples), slicesClone(s.marks)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// quantile returns the q-quantile of d, which it sorts.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))]
}

// windowMean is the mean of the values f gives of the samples within
// [from, to), NaNs left out.
func windowMean(samples []sample, from, to time.Time, f func(sample) float64) (float64, int) {
	sum, n := 0.0, 0
	for _, x := range samples {
		if x.at.Before(from) || !x.at.Before(to) {
			continue
		}
		if v := f(x); !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return sum / float64(n), n
}
