// Command metricslimits measures the Prometheus endpoint of a real
// `gputop serve --metrics`: what N idle keep-alive connections (one scrape
// each, then left open) leave held, in connections, sockets and RSS, right
// away and once the idle timeout has passed; and S scrapers at once, each
// scraping M times on its own keep-alive connection: how many scrapes
// succeed and how long they take. Eight agents on the socket give the
// scrapes something to say.
//
//	go build -o bin/gputop . && go run ./bench/cmd/metricslimits -gputop bin/gputop
//	    [-conns 10000] [-scrapers 16] [-scrapes 50] [-idle 35s]
//
// Give it an older build's binary to compare. It raises its descriptor
// limit (and so gputop's) to the hard limit, so N connections can be
// opened at all.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gputop/gputop/internal/scrapeconn"
)

func main() {
	bin := flag.String("gputop", "bin/gputop", "the gputop binary to measure")
	conns := flag.Int("conns", 10000, "idle keep-alive connections to open, one scrape each")
	scrapers := flag.Int("scrapers", 16, "scrapers at once")
	scrapes := flag.Int("scrapes", 50, "scrapes each scraper makes")
	idle := flag.Duration("idle", 35*time.Second, "how long to leave the idle connections before looking again")
	flag.Parse()
	if err := run(*bin, *conns, *scrapers, *scrapes, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "metricslimits:", err)
		os.Exit(1)
	}
}

func run(bin string, nConns, nScrapers, nScrapes int, idle time.Duration) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	dir, err := os.MkdirTemp("", "metricslimits-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	sock := filepath.Join(dir, "gputop.sock")
	cmd := exec.Command(bin, "serve", "--source", "agent", "--socket", sock, "--metrics", addr)
	var stderr lockedBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if err := waitUp(addr); err != nil {
		return fmt.Errorf("%v\n%s", err, stderr.String())
	}
	for i := range 8 {
		c, err := agent(sock, 9000+i, i)
		if err != nil {
			return err
		}
		defer c.Close()
	}
	pid := cmd.Process.Pid
	fmt.Printf("# gputop serve --metrics (%s), %s, descriptor limit %d\n\n", bin, time.Now().Format("2006-01-02"), lim.Cur)
	time.Sleep(time.Second) // the agents attached
	fmt.Println("| when | gputop's sockets | connections the server closed (of those answered) | RSS MiB | scrapes not answered 200 |")
	fmt.Println("| --- | --- | --- | --- | --- |")
	row := func(when string, cs []net.Conn, failed int) {
		fmt.Printf("| %s | %d | %s | %.1f | %d |\n", when, sockets(pid), closedOf(cs), rssMiB(pid), failed)
	}
	row("start (8 agents)", nil, 0)

	// N idle keep-alive connections, opened 32 at a time
	cs := make([]net.Conn, nConns)
	var failed atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= nConns {
					return
				}
				c, err := scrapeOnce(addr)
				if err != nil {
					failed.Add(1)
				}
				cs[i] = c
			}
		})
	}
	wg.Wait()
	opened := time.Since(t0)
	held := cs[:0]
	for _, c := range cs {
		if c != nil {
			held = append(held, c)
		}
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	row(fmt.Sprintf("after %d keep-alive connections (%.1f s)", nConns, opened.Seconds()), held, int(failed.Load()))
	fresh := time.Now()
	fc, ferr := scrapeOnce(addr)
	if fc != nil {
		fc.Close()
	}
	freshNote := fmt.Sprintf("%.1f ms", float64(time.Since(fresh).Microseconds())/1000)
	if ferr != nil {
		freshNote = "failed: " + ferr.Error()
	}

	// S scrapers at once
	lat, codes, errs := parallel(addr, nScrapers, nScrapes)
	time.Sleep(idle)
	row(fmt.Sprintf("%v later", idle.Round(time.Second)), held, 0)
	fmt.Printf("\nA fresh scrape with those connections held: %s.\n", freshNote)
	total := nScrapers * nScrapes
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) string {
		if len(lat) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())/1000)
	}
	var cl []string
	for c, n := range codes {
		cl = append(cl, fmt.Sprintf("%d: %d", c, n))
	}
	sort.Strings(cl)
	fmt.Printf("\n%d scrapers at once, %d scrapes each (keep-alive): %d of %d answered 200 (%.1f%%), status %s, %d errors; latency ms p50 %s, p99 %s, max %s\n",
		nScrapers, nScrapes, codes[200], total, 100*float64(codes[200])/float64(total), strings.Join(cl, ", "), errs, pct(0.5), pct(0.99), pct(1))
	lines := 0
	for _, l := range strings.Split(stderr.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, "gputop serve: ") {
			lines++
		}
	}
	fmt.Printf("\nLines on serve's stderr that are not gputop's log (net/http's own): %d\n", lines)
	return nil
}

// scrapeOnce makes one request on a new connection and returns it open,
// whatever the status (a 503 leaves it open too); err says what the
// status was when it was not 200.
func scrapeOnce(addr string) (net.Conn, error) {
	c, status, err := scrapeconn.Once(addr, 10*time.Second)
	if err == nil && status != 200 {
		return c, errNot200
	}
	return c, err
}

var errNot200 = errors.New("not 200")

// parallel runs n scrapers of m scrapes each, each with its own client.
func parallel(addr string, n, m int) (lat []time.Duration, codes map[int]int, errs int) {
	codes = map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			<-start
			for range m {
				t := time.Now()
				r, err := cl.Get("http://" + addr + "/metrics")
				d := time.Since(t)
				mu.Lock()
				if err != nil {
					errs++
				} else {
					io.Copy(io.Discard, r.Body)
					r.Body.Close()
					codes[r.StatusCode]++
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	return lat, codes, errs
}

// agent attaches a ranked agent with a few samples, and keeps it open.
func agent(sock string, pid, rank int) (net.Conn, error) {
	var c net.Conn
	var err error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if c, err = net.Dial("unix", sock); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	fmt.Fprintf(c, `{"type":"hello","v":1,"pid":%d,"argv":["train.py"],"torch":"2.11.0","rank":"%d","local_rank":"%d","world_size":"8","job":"bench","devices":[{"index":0,"uuid":"GPU-bench-%d","name":"Bench GPU","total":150000000000}],"t":%d}`+"\n",
		pid, rank, rank, rank, now)
	for i := range 100 {
		fmt.Fprintf(c, `{"type":"sample","t":%d,"dev":0,"allocated":%d,"reserved":%d,"peak":%d,"inactive":0,"alloc_retries":0,"ooms":0}`+"\n",
			now+int64(i)*int64(time.Millisecond), (1000+i)<<20, 2000<<20, 1100<<20)
	}
	return c, nil
}

func waitUp(addr string) error {
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if r, err := http.Get("http://" + addr + "/"); err == nil {
			r.Body.Close()
			return nil
		}
	}
	return fmt.Errorf("%s never answered", addr)
}

// sockets counts the process's open sockets.
func sockets(pid int) int {
	d := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(d)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(d, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

func rssMiB(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// closedOf says how many of cs the server has closed, checked 64 at a time.
func closedOf(cs []net.Conn) string {
	if len(cs) == 0 {
		return "-"
	}
	var closed atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(cs) {
					return
				}
				c := cs[i]
				c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
				_, err := c.Read(make([]byte, 1))
				var ne net.Error
				if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
					closed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return fmt.Sprintf("%d of %d", closed.Load(), len(cs))
}

// lockedBuf collects the child's stderr.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
