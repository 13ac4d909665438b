package metrics

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gputop/gputop/internal/testcert"
	"github.com/gputop/gputop/wire"
)

// serve starts a server over a store with one agent whose allocated
// series spiked to 9000; it stops when the test ends.
func serve(t *testing.T, opt Options) *Server {
	t.Helper()
	st := newStore()
	st.AgentHello(rankHello(4242, "0"))
	now := time.Now().UnixNano()
	for i := int64(0); i < 1000; i++ {
		v := uint64(5000)
		if i == 500 {
			v = 9000
		}
		st.AgentSample(4242, wire.Sample{T: now - (1000-i)*ms, Dev: 0, Allocated: v})
	}
	s, err := Listen("127.0.0.1:0", st, opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

// Sixteen scrapers at once, twenty scrapes each: every one is answered
// (none refused because others are scraping) and each sees the spike.
func TestServerParallelScrapes(t *testing.T) {
	s := serve(t, Options{Hostname: "n"})
	url := "http://" + s.Addr() + "/metrics"
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	var missed int
	for range 16 {
		wg.Go(func() {
			<-start
			for range 20 {
				r, err := http.Get(url)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				mu.Lock()
				codes[r.StatusCode]++
				if r.StatusCode == 200 && !strings.Contains(string(b), `pid="4242",rank="0"} 9000`) {
					missed++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if codes[200] != 16*20 || missed > 0 {
		t.Fatalf("status codes %v (want 320 x 200); %d answers without the spike", codes, missed)
	}
}

// keepAlive is a client connection that made one request and holds the
// connection open, as a keep-alive client between scrapes does.
func keepAlive(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return c
}

// closedByServer tells whether the server has closed c (a read ends with
// EOF or a reset rather than waiting).
func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// Past MaxConns the connections idle longest are closed to make room and a
// fresh scrape is answered; what the cap closed is counted in the log.
func TestServerConnCapClosesTheOldestIdle(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	s := serve(t, Options{Hostname: "n", Log: func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }})
	var conns []net.Conn
	for range MaxConns + 10 {
		conns = append(conns, keepAlive(t, s.Addr()))
	}
	if n := s.cap.held(); n > MaxConns {
		t.Fatalf("%d connections held, cap %d", n, MaxConns)
	}
	// the oldest were closed (to the order in which the server saw each
	// become idle, which may differ a little from the client's)
	var closed []int
	for i, c := range conns {
		if closedByServer(c) {
			closed = append(closed, i)
		}
	}
	if len(closed) != 10 || closed[9] >= 20 {
		t.Errorf("closed the idle connections %v (oldest first), want 10 of the oldest", closed)
	}
	r, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("a fresh scrape: %v", err)
	}
	r.Body.Close()
	s.report()
	mu.Lock()
	defer mu.Unlock()
	evicted := 0 // in one line, or two when the 10 s report came between
	for _, l := range lines {
		var n, ev, ref int
		if _, err := fmt.Sscanf(l, "metrics: %d connections past the cap of 64: %d idle ones closed to make room, %d new ones refused", &n, &ev, &ref); err != nil || n != ev || ref != 0 {
			t.Errorf("log line %q (%v)", l, err)
		}
		evicted += ev
	}
	if evicted != 11 {
		t.Errorf("the log counts %d connections closed, want 11 (10 idle ones, then one for the fresh scrape):\n%s", evicted, strings.Join(lines, "\n"))
	}
}

// The cap never closes a connection that is answering a request: with
// every one busy, the newcomer is closed instead.
func TestConnCapKeepsBusyConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnCap(ln, 2)
	defer l.Close()
	accept := func(state http.ConnState) (client net.Conn, server net.Conn) {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		server, err = l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		l.track(server, state)
		return client, server
	}
	busy1, _ := accept(http.StateActive)
	idle, _ := accept(http.StateIdle)
	c3, s3 := accept(http.StateActive) // closes idle, the only one not busy
	if !closedByServer(idle) || closedByServer(busy1) || closedByServer(c3) {
		t.Fatal("the cap closed a busy connection, or kept the idle one")
	}
	// all busy: the next one is closed at once and Accept waits for another
	extra, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	got := make(chan net.Conn)
	go func() { c, _ := l.Accept(); got <- c }()
	if !waitClosed(extra) || l.refused.Load() != 1 {
		t.Fatalf("the connection past a cap of busy ones was not refused (refused %d)", l.refused.Load())
	}
	s3.Close() // a busy one ends: room for the next
	last, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer last.Close()
	select {
	case c := <-got:
		if c == nil || l.held() != 2 {
			t.Fatalf("accepted %v, %d held", c, l.held())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no room after a busy connection ended")
	}
}

// waitClosed waits (at most 5 s) for the server to close c.
func waitClosed(c net.Conn) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		if closedByServer(c) {
			return true
		}
	}
	return false
}

// The HTTP server's errors (here a TLS handshake that is not one) go to
// the log given, not to stderr, and a flood of them makes one line and
// then a count.
func TestServerErrorsGoToTheLog(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	cfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(cfg, []byte("tls_server_config:\n  cert_file: "+cert+"\n  key_file: "+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	s := serve(t, Options{Hostname: "n", WebConfig: cfg, Log: func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }})
	for range 20 {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("\x16\x03\x01\x00\x05hello")) // a TLS record that is no ClientHello
		io.Copy(io.Discard, c)
		c.Close()
	}
	s.log.flush(time.Now().Add(logEvery))
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "metrics: http: TLS handshake error from 127.0.0.1:") ||
		!strings.HasPrefix(lines[1], "metrics: 19 more HTTP server errors not shown, the newest: http: TLS handshake error") {
		t.Fatalf("log:\n%s", strings.Join(lines, "\n"))
	}
	// and a client that trusts the certificate is served
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(cert)
	pool.AppendCertsFromPEM(pem)
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	r, err := cl.Get("https://" + s.Addr() + "/metrics")
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("https scrape: %v", err)
	}
	r.Body.Close()
}

// A web configuration that does not load stops Listen, naming the file.
func TestListenRefusesABadWebConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "web.yml")
	os.WriteFile(cfg, []byte("basic_auth_users:\n  alice: not-a-bcrypt-hash\n"), 0o600)
	_, err := Listen("127.0.0.1:0", newStore(), Options{WebConfig: cfg})
	if err == nil || !strings.HasPrefix(err.Error(), "--web.config.file "+cfg+": ") {
		t.Fatalf("err = %v", err)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, _, err := testcert.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
