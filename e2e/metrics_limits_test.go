package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gputop/gputop/internal/scrapeconn"
)

// metricsServe is a running `gputop serve --source agent --metrics`.
type metricsServe struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	addr   string
	sock   string
}

// startMetricsServe starts gputop serve with the metrics endpoint on a
// free port, its open descriptors limited to nofile (0: as it is), and
// waits for the endpoint's log line.
func startMetricsServe(t *testing.T, nofile int, args ...string) *metricsServe {
	t.Helper()
	dir := t.TempDir()
	s := &metricsServe{stderr: &lockedBuffer{}, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), sock: filepath.Join(dir, "gputop.sock")}
	argv := append([]string{binary, "serve", "--source", "agent", "--socket", s.sock, "--metrics", s.addr}, args...)
	if nofile > 0 {
		argv = append([]string{"sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$@"`, nofile), "sh"}, argv...)
	}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait() })
	s.stderr.waitFor(t, "gputop serve: metrics: serving ")
	return s
}

// sockets counts the process's open sockets (its descriptors that are).
func (s *metricsServe) sockets(t *testing.T) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// scrapeOnce makes one request on a new connection and leaves the
// connection open (a keep-alive client between scrapes); it fails when
// no answer comes within 5 s.
func scrapeOnce(addr string) (net.Conn, error) {
	c, status, err := scrapeconn.Once(addr, 5*time.Second)
	if err == nil && status != 200 {
		c.Close()
		return nil, fmt.Errorf("status %d", status)
	}
	return c, err
}

// closedByServer tells whether the other end has closed c.
func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// 300 keep-alive connections, each left idle after one scrape, against
// `gputop serve --metrics` allowed 200 descriptors: every scrape is
// answered, the endpoint holds no more than its cap of 64 connections
// (the oldest idle are closed to make room), an agent still attaches,
// sixteen scrapers at once all get their answer, and once the idle timeout
// (30 s) has passed every idle connection is closed. Nothing of net/http's
// own (an "Accept error") reaches serve's stderr: every line there is
// gputop's log.
func TestMetricsIdleConnections(t *testing.T) {
	s := startMetricsServe(t, 200)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 300 {
		c, err := scrapeOnce(s.addr)
		if err != nil {
			t.Fatalf("scrape %d on its own connection: %v\nserve said:\n%s", i, err, s.stderr.String())
		}
		conns = append(conns, c)
	}
	if n := s.sockets(t); n > 64+2 { // the cap, the TCP listener and the agent socket
		t.Errorf("gputop serve holds %d sockets after 300 idle keep-alive connections", n)
	}
	open := 0
	for _, c := range conns {
		if !closedByServer(c) {
			open++
		}
	}
	if open > 64 {
		t.Errorf("%d of the 300 idle connections are still open, cap 64", open)
	}
	// an agent attaches with the connections held
	a := startRankAgent(t, s.sock, 7100, 0)
	a.sample(0, 100<<20)
	s.stderr.waitFor(t, "pid 7100")

	// sixteen scrapers at once, each scraping ten times in a row on its
	// own connections: none is refused because others are scraping
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	start := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			<-start
			for range 10 {
				c, err := scrapeOnce(s.addr)
				if err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
					continue
				}
				c.Close()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of 160 parallel scrapes failed: %v", len(failed), failed[0])
	}

	// past the idle timeout every idle connection has been closed
	time.Sleep(30 * time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for open = -1; open != 0 && time.Now().Before(deadline); {
		open = 0
		for _, c := range conns {
			if !closedByServer(c) {
				open++
			}
		}
	}
	if open != 0 {
		t.Errorf("%d idle connections still open 40 s after their scrape", open)
	}
	if n := s.sockets(t); n > 3 {
		t.Errorf("gputop serve holds %d sockets once its clients are idle", n)
	}
	for _, l := range strings.Split(strings.TrimRight(s.stderr.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "gputop serve: ") || strings.Contains(l, "Accept error") {
			t.Errorf("serve's stderr has a line that is not gputop's log: %q", l)
		}
	}
	if !strings.Contains(s.stderr.String(), "gputop serve: metrics: ") || !strings.Contains(s.stderr.String(), "idle ones closed to make room") {
		t.Errorf("the connections closed past the cap are not in the log:\n%s", s.stderr.String())
	}
}
