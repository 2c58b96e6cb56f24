package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// SignIn serves api, the HTTP API, on loopback and has concurrency clients
// ask it for sign-in links for distinct addresses for d, each request one
// unit of work with its events and its outbox message. No relay runs, so
// the figure is the API's and its database's alone. It closes api.
func (b Bench) SignIn(ctx context.Context, api *http.Server, concurrency int, d time.Duration) error {
	return b.serveSignIns(ctx, api, concurrency, d).report(b.Out, "signin", d)
}

// serveSignIns serves api on loopback for a round of [Bench.SignIn], and
// closes it.
func (b Bench) serveSignIns(ctx context.Context, api *http.Server, concurrency int, d time.Duration) signInResult {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return signInResult{err: err}
	}
	go func() { _ = api.Serve(ln) }()
	defer func() { _ = api.Close() }()
	url := "http://" + ln.Addr().String() + "/v1/sign-in-links"
	return b.signInRound(ctx, url, concurrency, d)
}

// signInResult is what a round of the sign-in benchmark measured.
type signInResult struct {
	lat     []time.Duration
	elapsed time.Duration
	err     error
	cut     error
}

// report prints the summary line of r, named name, for a round meant to
// last d, or returns why there is none.
func (r signInResult) report(out io.Writer, name string, d time.Duration) error {
	if r.err != nil {
		return fmt.Errorf("bench %s: %w", name, r.err)
	}
	if len(r.lat) == 0 {
		if r.cut != nil {
			fmt.Fprintf(out, "%s: 0 requests in %.2fs (cut short)\n", name, r.elapsed.Seconds())
			return &CutShortError{Name: "bench " + name, Err: r.cut}
		}
		return fmt.Errorf("bench %s: no request completed", name)
	}
	lat := slices.Sorted(slices.Values(r.lat))
	rate := float64(len(lat)) / r.elapsed.Seconds()
	line := fmt.Sprintf("%s: %d requests in %.2fs, %.0f req/s, p50=%s p99=%s",
		name, len(lat), r.elapsed.Seconds(), rate, percentile(lat, 0.50), percentile(lat, 0.99))
	if r.cut != nil && r.elapsed < d {
		fmt.Fprintf(out, "%s (cut short: %.1fs of %s)\n", line, r.elapsed.Seconds(), d)
		return &CutShortError{Name: "bench " + name, Done: int64(len(lat)), Err: r.cut}
	}
	_, err := fmt.Fprintln(out, line)
	return err
}

// signInRound has concurrency clients ask url for sign-in links for
// distinct addresses for d.
func (b Bench) signInRound(ctx context.Context, url string, concurrency int, d time.Duration) signInResult {
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
		done atomic.Int64
	)
	stopProfile := b.timed(done.Load)
	defer stopProfile()
	began := time.Now()
	until := began.Add(d)
	for w := range concurrency {
		wg.Go(func() {
			var mine []time.Duration
			fail := func(err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			client, err := newKeepAliveClient(url, 10*time.Second)
			if err != nil {
				fail(err)
				return
			}
			defer client.Close()
			var body []byte
			for i := 0; time.Now().Before(until) && ctx.Err() == nil; i++ {
				body = fmt.Appendf(body[:0], `{"email":"bench-%d-%d@example.com"}`, w, i)
				start := time.Now()
				status, err := client.Post(ctx, body)
				if err != nil && ctx.Err() != nil {
					break // Cut short: this request does not count.
				}
				if err == nil && status != http.StatusAccepted {
					err = fmt.Errorf("status %d", status)
				}
				if err != nil {
					fail(err)
					return
				}
				mine = append(mine, time.Since(start))
				done.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r := signInResult{lat: lat, elapsed: time.Since(began), cut: ctx.Err()}
	if len(errs) > 0 {
		r.err = fmt.Errorf("%d requests failed, the first: %w", len(errs), errs[0])
	}
	return r
}
