package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// call posts body as application/json to path on the client's host, with
// the bearer token when it is not empty, and returns the status of the
// answer, whose body it writes to answer (nil: discards it). It is the
// form of [keepAliveClient.Post] for a benchmark that calls more than one
// route, as a person does: on the same kept connection, written in one
// call, read in the caller's goroutine. A request ctx cuts short fails
// with ctx's error.
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
