package agentlink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// The NVML devices every test store starts with; the vectors' hello maps
// cuda:0 to uuidB (NVML 1) and cuda:1 to uuidA (NVML 0), as
// CUDA_VISIBLE_DEVICES=1,0 would.
const (
	uuidA = "GPU-6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
	uuidB = "GPU-d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6"
	t0    = int64(1767225600000000000)
	ms    = int64(time.Millisecond)
)

const vectorDir = "../testdata/protocol"

// testEpoch and testNow are the test servers' clock: it reads t0 when the
// tests start, so that the vectors' times (about t0) are as near to it as
// a live agent's are to gputop's clock.
var testEpoch = time.Now()

func testNow() time.Time { return time.Unix(0, t0).Add(time.Since(testEpoch)) }

func newStore(t *testing.T, devices bool) *store.Store {
	t.Helper()
	st := store.New(store.Options{RawCapacity: 10_000, Tiers: []store.TierSpec{{Width: 100 * time.Millisecond, Buckets: 100}}})
	if devices {
		st.SetDevice(store.Device{Index: 0, UUID: uuidA, Name: "NVIDIA H200", Total: 150754820096, Source: "nvml"})
		st.SetDevice(store.Device{Index: 1, UUID: uuidB, Name: "NVIDIA H200", Total: 150754820096, Source: "nvml"})
	}
	return st
}

// logRec collects the server's log lines.
type logRec struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRec) add(s string) { l.mu.Lock(); l.lines = append(l.lines, s); l.mu.Unlock() }

func (l *logRec) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// find returns the first line containing sub.
func (l *logRec) find(sub string) (string, bool) {
	for _, s := range l.all() {
		if strings.Contains(s, sub) {
			return s, true
		}
	}
	return "", false
}

// wait returns the first log line containing sub, failing after 10 s.
func (l *logRec) wait(t *testing.T, sub string) string {
	t.Helper()
	var line string
	waitFor(t, "log line containing "+sub, func() bool {
		var ok bool
		line, ok = l.find(sub)
		return ok
	})
	return line
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type testServer struct {
	*Server
	st   *store.Store
	logs *logRec
	stop func() // cancels Serve and waits for it to return
}

// startServer listens in a fresh directory and serves until the test ends.
// tune, if given, runs between Listen and Serve.
func startServer(t testing.TB, st *store.Store, tune func(*Server)) *testServer {
	t.Helper()
	logs := &logRec{}
	path := filepath.Join(t.TempDir(), "gputop.sock")
	s, err := Listen(path, ingest.New(st), Options{Log: logs.add, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Serve did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return &testServer{Server: s, st: st, logs: logs, stop: stop}
}

// peer is a test client on a real socket.
type peer struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, path string) *peer {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &peer{t: t, conn: c, r: bufio.NewReader(c)}
}

func (p *peer) send(lines ...[]byte) {
	p.t.Helper()
	for _, l := range lines {
		if !bytes.HasSuffix(l, []byte("\n")) {
			l = append(append([]byte(nil), l...), '\n')
		}
		if _, err := p.conn.Write(l); err != nil {
			p.t.Fatalf("write: %v", err)
		}
	}
}

func (p *peer) sendFrame(v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	p.send(b)
}

// readLine reads one line from gputop. The limit only stops a hung test:
// under -race on a loaded machine, checking a 13 MB re-encoded frame took
// over 10 s.
func (p *peer) readLine() ([]byte, error) {
	p.conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	return p.r.ReadBytes('\n')
}

// reply reads gputop's reply frame.
func (p *peer) reply() wire.Reply {
	p.t.Helper()
	line, err := p.readLine()
	if err != nil {
		p.t.Fatalf("reading reply: %v (got %q)", err, line)
	}
	var r wire.Reply
	if err := json.Unmarshal(line, &r); err != nil || r.Type != wire.TypeReply {
		p.t.Fatalf("not a reply frame: %q (%v)", line, err)
	}
	return r
}

// closed checks that gputop closed the connection (nothing more to read).
func (p *peer) closed() {
	p.t.Helper()
	line, err := p.readLine()
	if err == nil || len(line) > 0 {
		p.t.Fatalf("connection still open: read %q, %v", line, err)
	}
	if os.IsTimeout(err) {
		p.t.Fatalf("connection still open after 10 s")
	}
}

func hello(pid int, devs ...wire.AgentDevice) wire.Hello {
	if devs == nil {
		devs = []wire.AgentDevice{}
	}
	return wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Argv: []string{"/home/u/train.py"},
		Torch: "2.11.0", Devices: devs, T: t0}
}

func sample(dev int, t int64, alloc uint64) wire.Sample {
	return wire.Sample{Type: wire.TypeSample, T: t, Dev: dev, Allocated: alloc, Reserved: 2 * alloc, Peak: 3 * alloc}
}

func agentByPID(st *store.Store, pid int) (store.Agent, bool) {
	for _, a := range st.Agents() {
		if a.Hello.PID == pid {
			return a, true
		}
	}
	return store.Agent{}, false
}

// vectorLines returns a vector file's lines, each with its "\n".
func vectorLines(t testing.TB, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}
