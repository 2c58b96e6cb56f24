package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestKeepAliveClient(t *testing.T) {
	// serve starts a server of h that counts the connections it accepts.
	serve := func(t *testing.T, h http.HandlerFunc) (url string, conns *atomic.Int64) {
		conns = new(atomic.Int64)
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		return srv.URL + "/v1/sign-in-links", conns
	}

	t.Run("PostsTheBodyOverOneConnection", func(t *testing.T) {
		t.Parallel()
		var (
			mu  sync.Mutex
			got []string
		)
		url, conns := serve(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			defer mu.Unlock()
			got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(b))
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"ignored":true}`))
		})
		c, err := newKeepAliveClient(url, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, body := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
			status, err := c.Post(t.Context(), []byte(body))
			if err != nil || status != http.StatusAccepted {
				t.Fatalf("Post(%s) = %d, %v; want 202", body, status, err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		want := `POST /v1/sign-in-links application/json {"n":3}`
		if len(got) != 3 || got[2] != want {
			t.Errorf("server saw %q, want three requests, the last %q", got, want)
		}
		if n := conns.Load(); n != 1 {
			t.Errorf("three requests took %d connections, want 1", n)
		}
	})

	t.Run("DialsAgainAfterTheServerCloses", func(t *testing.T) {
		t.Parallel()
		url, conns := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		c, err := newKeepAliveClient(url, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for range 2 {
			if status, err := c.Post(t.Context(), []byte(`{}`)); err != nil || status != http.StatusTooManyRequests {
				t.Fatalf("Post = %d, %v; want 429", status, err)
			}
		}
		if n := conns.Load(); n != 2 {
			t.Errorf("two answers with Connection: close took %d connections, want 2", n)
		}
	})

	t.Run("EndsARequestWhenItsContextEnds", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		arrived := make(chan struct{}, 1)
		url, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			<-release
		})
		defer close(release)
		c, err := newKeepAliveClient(url, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-arrived
			cancel()
		}()
		if _, err := c.Post(ctx, []byte(`{}`)); !errors.Is(err, context.Canceled) {
			t.Errorf("Post of a request whose context ended = %v, want context.Canceled", err)
		}
	})

	t.Run("GivesUpOnAServerThatDoesNotAnswer", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		url, _ := serve(t, func(w http.ResponseWriter, r *http.Request) { <-release })
		defer close(release)
		c, err := newKeepAliveClient(url, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var ne net.Error
		if _, err := c.Post(t.Context(), []byte(`{}`)); !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("Post to a server that does not answer = %v, want a timeout", err)
		}
	})

	t.Run("RefusesAURLItCannotPostTo", func(t *testing.T) {
		t.Parallel()
		for _, u := range []string{"https://127.0.0.1:1/x", "::", "ftp://host/x", "http:///x"} {
			if _, err := newKeepAliveClient(u, time.Second); err == nil {
				t.Errorf("newKeepAliveClient(%q) succeeded, want an error", u)
			}
		}
	})
}
