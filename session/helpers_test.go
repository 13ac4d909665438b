package session

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gputop/gputop/metrics"
	"github.com/gputop/gputop/wire"
)

// agentOptions are a session of the agent socket alone (no NVML: CI has
// no GPU), serving metrics on a port of the kernel's choosing.
func agentOptions(t *testing.T) Options {
	t.Helper()
	return Options{
		Agents: true, Socket: filepath.Join(t.TempDir(), "s.sock"),
		Metrics: "127.0.0.1:0", MetricsWindow: metrics.DefaultWindow,
		Rate: 1000, Tool: "gputop test",
	}
}

// agent is a PyTorch agent's end of the real socket: pid is this test's
// own, as the kernel tells the server.
type agent struct {
	c net.Conn
	r *bufio.Reader
}

// attach connects to sock as an agent with one device (torch cuda:0),
// sends allocated bytes for it at t, and waits until the store has the
// sample.
func attach(t *testing.T, s *Session, sock string, allocated uint64, at int64) *agent {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, `{"type":"hello","v":1,"pid":%d,"argv":["train.py"],"torch":"2.11.0","devices":[{"index":0,"uuid":"GPU-unit","name":"Unit GPU","total":85899345920}],"t":%d}`+"\n", os.Getpid(), at)
	fmt.Fprintf(c, `{"type":"sample","t":%d,"dev":0,"allocated":%d,"reserved":%d,"peak":%d}`+"\n", at, allocated, 2*allocated, allocated)
	waitFor(t, "the agent's sample in the store", func() bool {
		for _, a := range s.Store().Agents() {
			if _, ok := a.Last[a.DevMap[0]]; ok {
				return true
			}
		}
		return false
	})
	return &agent{c: c, r: bufio.NewReader(c)}
}

// request reads the next request gputop sends the agent.
func (a *agent) request(t *testing.T) wire.Request {
	t.Helper()
	a.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := a.r.ReadString('\n')
	if err != nil {
		t.Fatalf("no request reached the agent: %v", err)
	}
	var req wire.Request
	if err := json.Unmarshal([]byte(line), &req); err != nil {
		t.Fatalf("request %q: %v", line, err)
	}
	return req
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// scrape gets /metrics at addr: its status, or the error of a port that
// no longer answers.
func scrape(addr string) (int, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// exists reports whether path names anything.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
