package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// keepAliveClient posts JSON bodies to one host over one HTTP/1.1
// connection that it keeps open between requests, and dials again when
// the server closes it. It is not safe for concurrent use: each of a
// benchmark's clients has its own.
//
// It exists so that a benchmark measures the server rather than its own
// client. net/http's client hands each request and response between two
// goroutines of the connection, and at sixteen clients on two cores that
// cost a sixth of the process's CPU, taken from the server it measured;
// pgbench, which the sign-in figure is compared with, is a light C
// client. This one writes each request in one call and reads the answer
// with net/http's own parser, [http.ReadResponse], in the caller's
// goroutine.
type keepAliveClient struct {
	host, path string
	timeout    time.Duration
	conn       net.Conn
	r          *bufio.Reader
	req        bytes.Buffer
}

// newKeepAliveClient returns a client of rawURL, an http:// URL with a
// host and a path, that gives each request timeout to be answered.
func newKeepAliveClient(rawURL string, timeout time.Duration) (*keepAliveClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("client: %q is not an http:// URL with a host", rawURL)
	}
	return &keepAliveClient{host: u.Host, path: u.RequestURI(), timeout: timeout}, nil
}

// Post sends body as application/json to the client's path and returns
// the status of the answer, whose body it reads to the end. A request ctx
// cuts short fails with ctx's error.
func (c *keepAliveClient) Post(ctx context.Context, body []byte) (int, error) {
	return c.call(ctx, c.path, "", body, nil)
}

// call posts body as application/json to path on the client's host, with
// the bearer token when it is not empty, and returns the status of the
// answer, whose body it writes to answer (nil: discards it), for a
// benchmark that calls more than one route, as a person does: on the same
// kept connection, written in one call, read in the caller's goroutine. A
// request ctx cuts short fails with ctx's error.
func (c *keepAliveClient) call(ctx context.Context, path, token string, body []byte, answer *bytes.Buffer) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if c.conn == nil {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", c.host)
		if err != nil {
			return 0, fmt.Errorf("client: %w", err)
		}
		c.conn, c.r = conn, bufio.NewReader(conn)
	}
	// Closing the connection is what ends a read or a write at once.
	stop := context.AfterFunc(ctx, func() { _ = c.conn.Close() })
	status, keep, err := c.exchange(path, token, body, answer)
	if !stop() {
		err = ctx.Err()
	}
	if err != nil || !keep {
		_ = c.conn.Close()
		c.conn = nil
	}
	return status, err
}

// exchange writes one request on the open connection and reads its
// answer, and reports whether the connection may carry the next one.
func (c *keepAliveClient) exchange(path, token string, body []byte, answer *bytes.Buffer) (status int, keep bool, err error) {
	if err := c.conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, false, fmt.Errorf("client: %w", err)
	}
	c.req.Reset()
	fmt.Fprintf(&c.req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, c.host, len(body))
	if token != "" {
		fmt.Fprintf(&c.req, "Authorization: Bearer %s\r\n", token)
	}
	c.req.WriteString("\r\n")
	c.req.Write(body)
	if _, err := c.conn.Write(c.req.Bytes()); err != nil {
		return 0, false, fmt.Errorf("client: write: %w", err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, false, fmt.Errorf("client: read: %w", err)
	}
	var into io.Writer = io.Discard
	if answer != nil {
		answer.Reset()
		into = answer
	}
	_, err = io.Copy(into, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return 0, false, fmt.Errorf("client: read body: %w", err)
	}
	return resp.StatusCode, !resp.Close, nil
}

// Close closes the connection, if one is open.
func (c *keepAliveClient) Close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}
