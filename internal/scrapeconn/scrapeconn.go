// Package scrapeconn makes one scrape of a /metrics endpoint over a
// connection of its own and leaves the connection open, as a Prometheus
// that keeps its connections alive does: for the checks of the endpoint's
// connection limits (e2e's test and bench/cmd/metricslimits).
package scrapeconn

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Once dials addr, GETs /metrics and reads the whole answer, all within
// timeout, and returns the connection, still open (the caller closes it),
// with the answer's status code. On an error the connection is closed.
func Once(addr string, timeout time.Duration) (net.Conn, int, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, 0, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		_, err = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	c.SetDeadline(time.Time{})
	return c, r.StatusCode, nil
}
