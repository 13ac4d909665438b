package agentlink

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// helperAgentEnv makes the test binary act as a training process that
// streams samples until it is killed (see TestKilledAgentKeepsHistory).
const helperAgentEnv = "AGENTLINK_TEST_AGENT_SOCKET"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperAgentEnv); path != "" {
		os.Exit(helperAgent(path))
	}
	os.Exit(m.Run())
}

func helperAgent(path string) int {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	enc := json.NewEncoder(c)
	h := hello(os.Getpid(), wire.AgentDevice{Index: 0, UUID: uuidB, Name: "NVIDIA H200"})
	h.Argv = []string{"killme.py"}
	h.T = testNow().UnixNano() // the parent test's clock
	if err := enc.Encode(h); err != nil {
		return 1
	}
	for i := uint64(1); ; i++ {
		if err := enc.Encode(sample(0, testNow().UnixNano(), i)); err != nil {
			return 1
		}
		time.Sleep(time.Millisecond)
	}
}

// hello + samples + marks land in the store on the NVML device with the
// hello's UUID, not on the NVML device with the torch index.
func TestHelloSamplesMarkMappedByUUID(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	p := dial(t, srv.Path())
	// CUDA_VISIBLE_DEVICES=1: torch's cuda:0 is NVML GPU 1.
	p.sendFrame(hello(77, wire.AgentDevice{Index: 0, UUID: uuidB, Name: "NVIDIA H200"}))
	for i := int64(1); i <= 50; i++ {
		p.sendFrame(sample(0, t0+i*ms, uint64(i)<<20))
	}
	p.sendFrame(wire.Mark{Type: wire.TypeMark, T: t0 + 51*ms, Label: "Epoch 5",
		Devs: []wire.DevStats{{Dev: 0, Allocated: 50 << 20, Reserved: 64 << 20, Peak: 60 << 20}}})
	waitFor(t, "mark", func() bool { return len(st.Rows()) == 1 })

	if n := st.Count(store.Key{Dev: 1, PID: 77, Metric: store.Allocated}); n != 50 {
		t.Errorf("GPU 1 has %d allocated samples of pid 77, want 50", n)
	}
	if n := st.Count(store.Key{Dev: 0, PID: 77, Metric: store.Allocated}); n != 0 {
		t.Errorf("GPU 0 has %d samples of pid 77; cuda:0 is GPU 1", n)
	}
	if v, _, _ := st.Latest(store.Key{Dev: 1, PID: 77, Metric: store.Peak}); v != 150<<20 {
		t.Errorf("peak latest %d", v)
	}
	row := st.Rows()[0]
	if row.Label != "Epoch 5" || row.Dev != 1 || row.PID != 77 || row.Source != "agent" ||
		*row.Allocated != 50<<20 || *row.Reserved != 64<<20 || *row.Peak != 60<<20 {
		t.Errorf("row %+v", row)
	}
	if len(st.Devices()) != 2 {
		t.Errorf("a known UUID must not add a device: %d devices", len(st.Devices()))
	}
	line := srv.logs.wait(t, "pid 77 (train.py): attached")
	if !strings.Contains(line, "cuda:0 = GPU 1") {
		t.Errorf("attach line does not show the mapping: %q", line)
	}

	// A sample for a torch index the hello did not list is dropped and
	// logged once.
	p.sendFrame(sample(3, t0+52*ms, 1))
	p.sendFrame(sample(3, t0+53*ms, 1))
	p.sendFrame(sample(0, t0+54*ms, 1))
	waitFor(t, "sample after unknown device", func() bool {
		return st.Count(store.Key{Dev: 1, PID: 77, Metric: store.Allocated}) == 51
	})
	n := 0
	for _, l := range srv.logs.all() {
		if strings.Contains(l, "sample for cuda:3, which its hello did not list; ignored") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("unknown device logged %d times, want once", n)
	}
}

// A UUID NVML does not know (agent-only machine) becomes a device of its own.
func TestAgentOnlyDevice(t *testing.T) {
	st := newStore(t, false)
	srv := startServer(t, st, nil)
	p := dial(t, srv.Path())
	p.sendFrame(hello(78, wire.AgentDevice{Index: 0, UUID: "GPU-only-agent", Name: "NVIDIA H200", Total: 1 << 30}))
	p.sendFrame(sample(0, t0+ms, 5))
	waitFor(t, "sample", func() bool { return st.Count(store.Key{Dev: 0, PID: 78, Metric: store.Allocated}) == 1 })
	if d := st.Devices(); len(d) != 1 || d[0].UUID != "GPU-only-agent" || d[0].Source != "agent" {
		t.Errorf("devices %+v", d)
	}
}

// Several agents at once each keep their own series.
func TestSeveralClients(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	const clients, samples = 8, 300
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(pid int) {
			defer wg.Done()
			conn, err := net.Dial("unix", srv.Path())
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			enc := json.NewEncoder(conn)
			enc.Encode(hello(pid, wire.AgentDevice{Index: 0, UUID: uuidA}, wire.AgentDevice{Index: 1, UUID: uuidB}))
			for i := 1; i <= samples; i++ {
				enc.Encode(sample(i%2, t0+int64(i)*ms, uint64(pid*1000+i)))
			}
			enc.Encode(wire.Bye{Type: wire.TypeBye, T: t0 + samples*ms + ms})
		}(1000 + c)
	}
	wg.Wait()
	waitFor(t, "all byes", func() bool {
		for _, a := range st.Agents() {
			if a.Connected {
				return false
			}
		}
		return len(st.Agents()) == clients
	})
	for c := 0; c < clients; c++ {
		pid := 1000 + c
		for dev := 0; dev < 2; dev++ {
			if n := st.Count(store.Key{Dev: dev, PID: pid, Metric: store.Reserved}); n != samples/2 {
				t.Errorf("pid %d GPU %d: %d samples, want %d", pid, dev, n, samples/2)
			}
		}
		// cuda:0 (odd i... even i) is GPU 0 here; the last even i is samples.
		if v, _, _ := st.Latest(store.Key{Dev: 0, PID: pid, Metric: store.Allocated}); v != uint64(pid*1000+samples) {
			t.Errorf("pid %d: last allocated %d", pid, v)
		}
		if a, _ := agentByPID(st, pid); a.Ended || a.EndReason != "bye" {
			t.Errorf("pid %d ended as %+v", pid, a)
		}
	}
}

// A client that sends garbage mid-stream is closed with a reason; what it
// sent before stays, marked ended; another client streaming meanwhile is
// untouched.
func TestGarbageClosesOnlyThatClient(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	good := dial(t, srv.Path())
	good.sendFrame(hello(501, wire.AgentDevice{Index: 0, UUID: uuidA}))
	bad := dial(t, srv.Path())
	bad.sendFrame(hello(502, wire.AgentDevice{Index: 0, UUID: uuidA}))
	for i := int64(1); i <= 10; i++ {
		good.sendFrame(sample(0, t0+i*ms, 1))
		bad.sendFrame(sample(0, t0+i*ms, 2))
	}
	bad.send([]byte("\x00\x01 not json at all"))
	r := bad.reply()
	if r.OK || !strings.HasPrefix(r.Error, "line 12: not valid JSON: ") {
		t.Errorf("reply %+v", r)
	}
	bad.closed()
	srv.logs.wait(t, "pid 502 (train.py): closed: line 12: not valid JSON")

	for i := int64(11); i <= 20; i++ {
		good.sendFrame(sample(0, t0+i*ms, 1))
	}
	waitFor(t, "good samples", func() bool { return st.Count(store.Key{Dev: 0, PID: 501, Metric: store.Allocated}) == 20 })
	if n := st.Count(store.Key{Dev: 0, PID: 502, Metric: store.Allocated}); n != 10 {
		t.Errorf("refused client's samples: %d kept, want 10", n)
	}
	a, _ := agentByPID(st, 502)
	if a.Connected || !a.Ended || !strings.HasPrefix(a.EndReason, "closed: line 12: not valid JSON") {
		t.Errorf("refused client: %+v", a)
	}
	if a, _ := agentByPID(st, 501); !a.Connected {
		t.Errorf("good client disconnected: %+v", a)
	}
}

// A client that sends its hello a byte at a time does not hold up another.
func TestSlowWriterDoesNotBlockOthers(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	slow := dial(t, srv.Path())
	b, _ := json.Marshal(hello(601, wire.AgentDevice{Index: 0, UUID: uuidA}))
	b = append(b, '\n')
	slow.conn.Write(b[:10])

	fast := dial(t, srv.Path())
	fast.sendFrame(hello(602, wire.AgentDevice{Index: 0, UUID: uuidA}))
	fast.sendFrame(sample(0, t0+ms, 1))
	waitFor(t, "fast client's sample", func() bool { return st.Count(store.Key{Dev: 0, PID: 602, Metric: store.Allocated}) == 1 })

	for _, c := range b[10:] {
		slow.conn.Write([]byte{c})
		time.Sleep(100 * time.Microsecond)
	}
	slow.sendFrame(sample(0, t0+ms, 1))
	waitFor(t, "slow client's sample", func() bool { return st.Count(store.Key{Dev: 0, PID: 601, Metric: store.Allocated}) == 1 })
}

// An agent that never reads: requests queue up, then writes hit their
// deadline and the connection is closed with a reason. RequestHolders never
// blocks, and another agent carries on.
func TestAgentNotReadingRequests(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, func(s *Server) { s.writeTimeout = 50 * time.Millisecond })
	deaf := dial(t, srv.Path())
	deaf.sendFrame(hello(701, wire.AgentDevice{Index: 0, UUID: uuidA}))
	other := dial(t, srv.Path())
	other.sendFrame(hello(702, wire.AgentDevice{Index: 0, UUID: uuidA}))
	waitFor(t, "both attached", func() bool { return len(st.Agents()) == 2 })

	done := make(chan error, 1)
	go func() {
		// Far more than the socket buffers hold; each call returns at once
		// (queued, or refused as not reading).
		var last error
		for i := 0; i < 1_000_000; i++ {
			if _, ok := srv.logs.find("pid 701 (train.py): closed: not reading requests"); ok {
				done <- nil
				return
			}
			last = srv.RequestHolders(701)
			if last != nil && !strings.Contains(last.Error(), "pid 701") {
				done <- last
				return
			}
		}
		done <- fmt.Errorf("connection never closed; last error %v", last)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("RequestHolders blocked")
	}
	waitFor(t, "deaf agent ended", func() bool { a, _ := agentByPID(st, 701); return a.Ended })
	a, _ := agentByPID(st, 701)
	if !strings.HasPrefix(a.EndReason, "closed: not reading requests") {
		t.Errorf("end reason %q", a.EndReason)
	}
	if err := srv.RequestHolders(701); err == nil || !strings.Contains(err.Error(), "no agent with pid 701") {
		t.Errorf("request to a closed agent: %v", err)
	}
	other.sendFrame(sample(0, t0+ms, 9))
	waitFor(t, "other agent's sample", func() bool { return st.Count(store.Key{Dev: 0, PID: 702, Metric: store.Allocated}) == 1 })
}

// gputop asks for holders; the agent's answer with that id is stored.
func TestRequestHoldersRoundTrip(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	p := dial(t, srv.Path())
	p.sendFrame(hello(801, wire.AgentDevice{Index: 0, UUID: uuidB}))
	waitFor(t, "attached", func() bool { _, ok := agentByPID(st, 801); return ok })
	if err := srv.RequestHolders(801); err != nil {
		t.Fatal(err)
	}
	if err := srv.RequestHolders(999); err == nil {
		t.Error("request to an unknown pid succeeded")
	}
	line, err := p.readLine()
	if err != nil {
		t.Fatal(err)
	}
	f, err := decodeFrame(line[:len(line)-1])
	req, ok := f.(wire.Request)
	if err != nil || !ok || req.What != "holders" || req.ID <= 0 {
		t.Fatalf("request line %q: %v", line, err)
	}
	p.sendFrame(wire.Holders{Type: wire.TypeHolders, T: t0 + ms, ID: req.ID, Dev: 0, Total: 1024,
		Groups: []wire.HolderGroup{{Kind: "container", Name: "losses", Bytes: 1024, Tensors: 2}}})
	waitFor(t, "holders", func() bool { a, _ := agentByPID(st, 801); return a.Holders != nil })
	a, _ := agentByPID(st, 801)
	if a.Holders.ID != req.ID || a.Holders.PID != 801 || a.Holders.Groups[0].Name != "losses" {
		t.Errorf("holders %+v", a.Holders)
	}
	if err := srv.RequestHolders(801); err != nil {
		t.Fatal(err)
	}
	line, _ = p.readLine()
	f, _ = decodeFrame(line[:len(line)-1])
	if r2, _ := f.(wire.Request); r2.ID <= req.ID {
		t.Errorf("second request id %d after %d", r2.ID, req.ID)
	}
}

// A client that vanishes without bye is marked ended; its samples stay.
func TestVanishedClientMarkedEnded(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	p := dial(t, srv.Path())
	p.sendFrame(hello(901, wire.AgentDevice{Index: 0, UUID: uuidA}))
	for i := int64(1); i <= 25; i++ {
		p.sendFrame(sample(0, t0+i*ms, uint64(i)))
	}
	p.conn.Write([]byte(`{"type":"sample","t":1767225600`)) // cut off mid-line
	waitFor(t, "samples", func() bool { return st.Count(store.Key{Dev: 0, PID: 901, Metric: store.Allocated}) == 25 })
	p.conn.Close()
	waitFor(t, "ended", func() bool { a, _ := agentByPID(st, 901); return a.Ended })
	a, _ := agentByPID(st, 901)
	if a.Connected || a.EndReason != "connection lost in the middle of a line" {
		t.Errorf("agent %+v", a)
	}
	if n := st.Count(store.Key{Dev: 0, PID: 901, Metric: store.Allocated}); n != 25 {
		t.Errorf("%d samples kept, want 25", n)
	}
	found := false
	for _, m := range st.Markers() {
		found = found || (m.PID == 901 && m.Kind == "ended")
	}
	if !found {
		t.Error("no ended marker")
	}
	srv.logs.wait(t, "pid 901 (train.py): connection lost")
}

// A real process killed with SIGKILL mid-stream: its history stays, marked
// ended.
func TestKilledAgentKeepsHistory(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperAgentEnv+"="+srv.Path())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	key := store.Key{Dev: 1, PID: pid, Metric: store.Allocated}
	waitFor(t, "samples from the child", func() bool { return st.Count(key) >= 20 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitFor(t, "child marked ended", func() bool { a, _ := agentByPID(st, pid); return a.Ended })
	a, _ := agentByPID(st, pid)
	if a.Connected || !strings.HasPrefix(a.EndReason, "connection lost") {
		t.Errorf("killed agent %+v", a)
	}
	if n := st.Count(key); n < 20 {
		t.Errorf("only %d samples kept", n)
	}
	srv.logs.wait(t, fmt.Sprintf("pid %d (killme.py): connection lost", pid))
}

// A second connection from the same pid replaces the first; the process is
// not marked ended by the old connection's end.
func TestReconnectReplacesConnection(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	old := dial(t, srv.Path())
	old.sendFrame(hello(1101, wire.AgentDevice{Index: 0, UUID: uuidA}))
	old.sendFrame(sample(0, t0+ms, 1))
	waitFor(t, "first sample", func() bool { return st.Count(store.Key{Dev: 0, PID: 1101, Metric: store.Allocated}) == 1 })

	nw := dial(t, srv.Path())
	nw.sendFrame(hello(1101, wire.AgentDevice{Index: 0, UUID: uuidA}))
	old.closed()
	nw.sendFrame(sample(0, t0+2*ms, 2))
	waitFor(t, "second sample", func() bool { return st.Count(store.Key{Dev: 0, PID: 1101, Metric: store.Allocated}) == 2 })
	srv.logs.wait(t, "pid 1101 (train.py): reconnected")
	if a, _ := agentByPID(st, 1101); !a.Connected || a.Ended {
		t.Errorf("after reconnect: %+v", a)
	}
	for _, l := range srv.logs.all() {
		if strings.Contains(l, "1101") && strings.Contains(l, "connection lost") {
			t.Errorf("old connection logged as lost: %q", l)
		}
	}
	if err := srv.RequestHolders(1101); err != nil {
		t.Fatal(err)
	}
	if line, err := nw.readLine(); err != nil || !strings.Contains(string(line), `"what":"holders"`) {
		t.Errorf("request went elsewhere: %q %v", line, err)
	}
}

// A second hello on the same connection updates the devices.
func TestHelloAgainUpdatesDevices(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	p := dial(t, srv.Path())
	p.sendFrame(hello(1201))
	h := hello(1201, wire.AgentDevice{Index: 0, UUID: uuidB})
	h.T = t0 + ms
	p.sendFrame(h)
	p.sendFrame(sample(0, t0+2*ms, 7))
	waitFor(t, "sample", func() bool { return st.Count(store.Key{Dev: 1, PID: 1201, Metric: store.Allocated}) == 1 })
	srv.logs.wait(t, "pid 1201 (train.py): updated its devices (torch 2.11.0; cuda:0 = GPU 1)")
}

func TestCheckPeerUID(t *testing.T) {
	if err := checkPeerUID(1000, 1000); err != nil {
		t.Errorf("same uid refused: %v", err)
	}
	err := checkPeerUID(1001, 1000)
	if err == nil || err.Error() != "peer uid 1001 is not gputop's uid 1000" {
		t.Errorf("other uid: %v", err)
	}
}

// peerCred reads the real credentials of a real peer: us.
func TestPeerCredIsOurs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	uid, pid, err := peerCred(sc)
	if err != nil || uid != os.Getuid() || pid != os.Getpid() {
		t.Errorf("peerCred = uid %d pid %d %v; want uid %d pid %d", uid, pid, err, os.Getuid(), os.Getpid())
	}
}

// The whole path over a real socket: our own uid is accepted; a server that
// believes it runs as another uid refuses us with the reason.
func TestPeerUIDOverSocket(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	p := dial(t, srv.Path())
	p.sendFrame(hello(1301, wire.AgentDevice{Index: 0, UUID: uuidA}))
	waitFor(t, "accepted", func() bool { _, ok := agentByPID(st, 1301); return ok })

	st2 := newStore(t, true)
	other := startServer(t, st2, func(s *Server) { s.uid = os.Getuid() + 1 })
	q := dial(t, other.Path())
	r := q.reply()
	want := fmt.Sprintf("peer uid %d is not gputop's uid %d", os.Getuid(), os.Getuid()+1)
	if r.OK || r.Error != want {
		t.Errorf("reply %+v, want %q", r, want)
	}
	q.closed()
	other.logs.wait(t, fmt.Sprintf("client pid %d: refused: %s", os.Getpid(), want))
	if len(st2.Agents()) != 0 {
		t.Error("refused peer reached the store")
	}
}

func TestListenSocketMode(t *testing.T) {
	srv := startServer(t, newStore(t, true), nil)
	fi, err := os.Stat(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want socket 0600", fi.Mode())
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gputop.sock")
	// A socket file whose listener is gone, as after a crash.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	st := newStore(t, true)
	s, err := Listen(path, ingest.New(st), Options{Log: func(string) {}})
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	defer s.ln.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("new socket does not answer: %v", err)
	}
	c.Close()
}

func TestListenRefusesNonSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gputop.sock")
	os.WriteFile(path, []byte("precious"), 0o600)
	_, err := Listen(path, ingest.New(newStore(t, true)), Options{})
	if err == nil || !strings.Contains(err.Error(), "exists and is not a socket") {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Error("the file was touched")
	}
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	if _, err := Listen(long, ingest.New(newStore(t, true)), Options{}); err == nil || !strings.Contains(err.Error(), "at most 107") {
		t.Errorf("long path: %v", err)
	}
}

// A second gputop on a live socket is refused, and the first one neither
// notices nor logs the probe.
func TestSecondServerRefused(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	_, err := Listen(srv.Path(), ingest.New(newStore(t, true)), Options{})
	if err == nil || err.Error() != "another gputop is listening on "+srv.Path() {
		t.Fatalf("err = %v", err)
	}
	p := dial(t, srv.Path())
	p.sendFrame(hello(1401, wire.AgentDevice{Index: 0, UUID: uuidA}))
	waitFor(t, "first server still serving", func() bool { _, ok := agentByPID(st, 1401); return ok })
	// the attach is filed in the store before its line is logged
	waitFor(t, "the attach logged", func() bool { return len(srv.logs.all()) >= 1 })
	if l := srv.logs.all(); len(l) != 1 || !strings.Contains(l[0], "attached") {
		t.Errorf("log: %q (the probe must not be logged)", l)
	}
}

// Serve returns on cancel with agents attached, removes its socket, and does
// not mark the agents ended (gputop stopped, they did not).
func TestServeShutdown(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	p := dial(t, srv.Path())
	p.sendFrame(hello(1501, wire.AgentDevice{Index: 0, UUID: uuidA}))
	waitFor(t, "attached", func() bool { _, ok := agentByPID(st, 1501); return ok })
	srv.stop()
	if _, err := os.Stat(srv.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file after Serve: %v", err)
	}
	p.closed()
	if a, _ := agentByPID(st, 1501); a.Ended {
		t.Errorf("agent marked ended by gputop's own exit: %+v", a)
	}
}

// Serve leaves alone a socket file that is no longer its own.
func TestServeKeepsForeignSocket(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	os.Remove(srv.Path())
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: srv.Path(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv.stop()
	if _, err := os.Stat(srv.Path()); err != nil {
		t.Errorf("another server's socket was removed: %v", err)
	}
}

// A connection that says nothing is closed after the first-frame timeout.
func TestSilentClientTimesOut(t *testing.T) {
	srv := startServer(t, newStore(t, true), func(s *Server) { s.firstFrameTimeout = 50 * time.Millisecond })
	p := dial(t, srv.Path())
	r := p.reply()
	if r.OK || r.Error != `no "hello", "snap" or "status" frame within 50ms` {
		t.Errorf("reply %+v", r)
	}
	p.closed()
}

func TestSnapRoundTrip(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	// An agent on GPU 1 makes the snapshot carry its allocator values.
	p := dial(t, srv.Path())
	now := testNow().UnixNano()
	h := hello(1601, wire.AgentDevice{Index: 0, UUID: uuidB})
	h.T = now
	p.sendFrame(h)
	p.sendFrame(sample(0, now, 3<<20))
	waitFor(t, "sample", func() bool { return st.Count(store.Key{Dev: 1, PID: 1601, Metric: store.Allocated}) == 1 })

	if err := Snap(srv.Path(), "Epoch 5", nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	rows := st.Rows()
	if len(rows) != 2 {
		t.Fatalf("%d rows, want one per device: %+v", len(rows), rows)
	}
	for _, r := range rows {
		if r.Label != "Epoch 5" || r.Source != "cli" {
			t.Errorf("row %+v", r)
		}
		if r.Dev == 1 && (r.PID != 1601 || r.Allocated == nil || *r.Allocated != 3<<20) {
			t.Errorf("GPU 1 row lacks the agent's values: %+v", r)
		}
	}
	srv.logs.wait(t, `snapshot "Epoch 5" from the shell on 2 device(s)`)
	if err := Snap(srv.Path(), "  ", nil, time.Second); err == nil {
		t.Error("empty label accepted")
	}
	// --end and --end=false win over the label
	yes, no := true, false
	if err := Snap(srv.Path(), "Epoch 6", &yes, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := Snap(srv.Path(), "Training end", &no, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Rows() {
		if (r.Label == "Epoch 6") != r.End {
			t.Errorf("row %q: end %v", r.Label, r.End)
		}
	}
}

// A snapshot from the shell with a label of nearly a megabyte makes rows
// labelled with its first wire.MaxLabelBytes, and a log line (drawn at
// every frame) as short.
func TestSnapLongLabel(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	long := strings.Repeat("z", wire.MaxFrameBytes-200)
	if err := Snap(srv.Path(), long, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Rows() {
		if len(r.Label) > wire.MaxLabelBytes || !strings.HasSuffix(r.Label, wire.LabelCut) {
			t.Fatalf("row labelled %d bytes: %.80q", len(r.Label), r.Label)
		}
	}
	line := srv.logs.wait(t, "from the shell on 2 device(s)")
	if len(line) > 2*wire.MaxLabelBytes {
		t.Fatalf("log line of %d bytes", len(line))
	}
}

func TestSnapNoDevices(t *testing.T) {
	srv := startServer(t, newStore(t, false), nil)
	err := Snap(srv.Path(), "Epoch 5", nil, 5*time.Second)
	if err == nil || err.Error() != "gputop refused the snapshot: no devices known yet" {
		t.Fatalf("err = %v", err)
	}
}

func TestSnapNoServer(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "gputop.sock")
	err := Snap(missing, "x", nil, time.Second)
	if err == nil || !strings.HasPrefix(err.Error(), "no gputop is running: nothing listens on "+missing) {
		t.Errorf("missing socket: %v", err)
	}
	// A stale socket file (gputop crashed) reads the same.
	ln, _ := net.ListenUnix("unix", &net.UnixAddr{Name: missing, Net: "unix"})
	ln.SetUnlinkOnClose(false)
	ln.Close()
	err = Snap(missing, "x", nil, time.Second)
	if err == nil || !strings.HasPrefix(err.Error(), "no gputop is running") {
		t.Errorf("stale socket: %v", err)
	}
}

// A server that never answers makes Snap fail after its timeout.
func TestSnapTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(2 * time.Second)
		}
	}()
	err = Snap(path, "x", nil, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 100ms") {
		t.Errorf("err = %v", err)
	}
}

// The socket file appears only once it listens, with its final mode: an
// agent that finds it is never refused (bound in place, the file exists
// before listen(2), and a dial in between gets ECONNREFUSED), and no name
// of the setup is left beside it.
func TestSocketAnswersOnceItExists(t *testing.T) {
	for i := range 300 {
		dir := t.TempDir()
		path := filepath.Join(dir, "gputop.sock")
		got := make(chan error, 1)
		go func() {
			for {
				if fi, err := os.Lstat(path); err == nil {
					if fi.Mode().Perm() != 0o600 {
						got <- fmt.Errorf("the file appeared with mode %v", fi.Mode())
						return
					}
					c, err := net.Dial("unix", path)
					if err == nil {
						c.Close()
					}
					got <- err
					return
				}
				runtime.Gosched()
			}
		}()
		s, err := Listen(path, ingest.New(newStore(t, true)), Options{Log: func(string) {}})
		if err != nil {
			t.Fatal(err)
		}
		err = <-got
		s.ln.Close()
		if err != nil {
			t.Fatalf("listen %d: the socket file existed but: %v", i, err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "gputop.sock" {
			t.Fatalf("listen %d: the directory holds %v", i, ents)
		}
	}
}

// A path too long to leave room for a name of its own beside it is bound
// in place, as before, still 0600.
func TestListenLongPathInPlace(t *testing.T) {
	dir := t.TempDir()
	name := strings.Repeat("s", maxPathLen-len(dir)-1)
	path := filepath.Join(dir, name)
	if len(path) != maxPathLen {
		t.Fatalf("path of %d bytes", len(path))
	}
	s, err := Listen(path, ingest.New(newStore(t, true)), Options{Log: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.ln.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v", fi, err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %v", ents)
	}
}
