package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// retryFor bounds how long one request is tried again while instances are
// away or the database answers 503.
const retryFor = 2 * time.Minute

// client sends the soak's requests to the instances in turn and writes
// every answer in the ledger.
type client struct {
	http   *http.Client
	ledger *ledger
	mu     sync.Mutex
	list   []string
	next   atomic.Uint64
}

func newClient(l *ledger) *client {
	return &client{ledger: l, http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
	}}
}

func (c *client) add(url string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, url)
}

func (c *client) urls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slicesClone(c.list)
}

// answer is an instance's answer.
type answer struct {
	status int
	body   []byte
}

// do sends the request until an instance gives an answer other than 503,
// moving to the next instance when one refuses the connection (killed) and
// trying again after a broken connection or a 503. uncertain counts the
// attempts whose outcome is unknown: a connection broken after the request
// went out, or a 503, which may follow a commit whose acknowledgement was
// lost.
func (c *client) do(ctx context.Context, method, path, token string, body any) (a answer, uncertain int, err error) {
	var raw []byte
	if body != nil {
		if raw, err = json.Marshal(body); err != nil {
			return answer{}, 0, err
		}
	}
	deadline := time.Now().Add(retryFor)
	for attempt := 0; ; attempt++ {
		if time.Now().After(deadline) {
			return answer{}, uncertain, fmt.Errorf("%s %s: no answer within %s", method, path, retryFor)
		}
		urls := c.urls()
		base := urls[c.next.Add(1)%uint64(len(urls))]
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(raw))
		if err != nil {
			return answer{}, uncertain, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		began := time.Now()
		resp, err := c.http.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				// Cut at the end of the run: the request may have been
				// done, its answer lost.
				return answer{}, uncertain + 1, ctx.Err()
			}
			if !refused(err) {
				uncertain++
			}
			if err := pause(ctx, 100*time.Millisecond); err != nil {
				return answer{}, uncertain, err
			}
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(began)
		if err != nil {
			uncertain++
			continue
		}
		c.ledger.answer(method, path, resp.StatusCode, resp.Header.Get("Retry-After"), b, began, took)
		if resp.StatusCode == http.StatusServiceUnavailable {
			uncertain++
			wait := time.Second
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 && time.Duration(s)*time.Second < wait {
				wait = time.Duration(s) * time.Second
			}
			if err := pause(ctx, wait); err != nil {
				return answer{}, uncertain, err
			}
			continue
		}
		return answer{status: resp.StatusCode, body: b}, uncertain, nil
	}
}

// refused tells a connection that was never made, so the request surely
// did nothing.
func refused(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
