package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// inNewPIDNamespace is argv run in a pid namespace of its own (and a user
// namespace, so that no privilege is needed), killed with unshare.
func inNewPIDNamespace(t *testing.T, argv ...string) []string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("this test needs unshare(1) (util-linux) to start processes in new pid namespaces")
	}
	return append([]string{unshare, "--user", "--map-root-user", "--pid", "--fork", "--kill-child"}, argv...)
}

// Two training processes in two containers that share gputop's socket, and
// gputop in a third (a DaemonSet without hostPID): each is pid 1 in its own
// pid namespace, and gputop can see neither's pid. They are two processes
// in the pane, each with its own figure, shown by a key of its connection
// and said to be namespace-local; neither closes the other's connection.
func TestSiblingPIDNamespacesAreTwoProcesses(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "nsagent")
	if out, err := exec.Command("go", "build", "-o", agent, "./testdata/nsagent").CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "gputop.sock")
	tm := startTermCmd(t, 140, 40, inNewPIDNamespace(t, binary, "--source", "agent", "--socket", sock)...)
	waitFile(t, sock)
	for _, mib := range []string{"111", "222"} {
		argv := inNewPIDNamespace(t, agent, sock, mib)
		cmd := exec.Command(argv[0], argv[1:]...)
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	scr := tm.waitFor("ns2:1")
	for _, want := range []string{"ns1:1", "111.0 MiB", "222.0 MiB", "pid namespace gputop cannot see"} {
		if !strings.Contains(scr, want) {
			scr = tm.waitFor(want)
		}
	}
	time.Sleep(time.Second) // a second in which neither may take the other's place
	scr = tm.screen()
	if os.Getenv("E2E_SHOW") != "" {
		t.Log(scr)
	}
	if strings.Contains(scr, "reconnected") || strings.Count(scr, "attached") < 2 {
		t.Fatalf("the two agents did not both stay attached:\n%s", scr)
	}
}

// shortAgent is one short-lived training process on the real socket:
// hello, a few samples, bye.
func shortAgent(t *testing.T, sock string, pid int) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := time.Now().UnixNano()
	enc := json.NewEncoder(c)
	frames := []any{wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Argv: []string{"sweep.py", fmt.Sprint(pid)},
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-e2e-sweep", Name: "E2E GPU", Total: 80 << 30}}, T: now}}
	for i := range 3 {
		frames = append(frames, wire.Sample{Type: wire.TypeSample, T: now + int64(i+1), Dev: 0, Allocated: uint64(i+1) << 20})
	}
	frames = append(frames, wire.Bye{Type: wire.TypeBye, T: now + 10})
	for _, f := range frames {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	bufio.NewReader(c).ReadBytes('\n') // gputop closes after bye
}

// A node that runs a sweep of short jobs: gputop keeps the most recently
// ended agents, forgets the rest, and the process pane lists a pane's worth
// and says how many ended processes it leaves out.
func TestEndedAgentsForgottenInTerminal(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "gputop.sock")
	tm := startTerm(t, 140, 40, "--source", "agent", "--socket", sock)
	waitFile(t, sock)
	for i := range 100 {
		shortAgent(t, sock, 30000+i)
	}
	// 100 ended: the store keeps 64 (store.DefaultOptions().KeepEnded),
	// the pane lists 32 of those (present.MaxEndedListed)
	scr := tm.waitFor("… and 68 ended")
	if !strings.Contains(scr, "30099") || strings.Contains(scr, "30000") {
		t.Fatalf("the pane does not list the most recently ended first:\n%s", scr)
	}
}

// The socket holds at most 1024 connections (agentlink.DefaultMaxConns): the
// next is answered with the reason, which the agent sees, and gputop logs
// it with the count; once one leaves, a new agent is taken.
func TestServeRefusesConnectionsPastTheCap(t *testing.T) {
	const limit = 1024
	sock := filepath.Join(t.TempDir(), "gputop.sock")
	_, out := startServe(t, t.TempDir(), sock)
	conns := make([]net.Conn, limit)
	for i := range conns {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
		fmt.Fprintf(c, `{"type":"hello","v":1,"pid":%d,"argv":["train.py"],"devices":[],"t":%d}`+"\n", 40000+i, time.Now().UnixNano())
	}
	out.waitFor(t, "pid 41023 (train.py): attached")

	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	var r wire.Reply
	if jerr := json.Unmarshal(line, &r); jerr != nil || r.OK || !strings.Contains(r.Error, fmt.Sprintf("gputop holds %d connections, its limit", limit)) {
		t.Fatalf("connection %d: got %q (%v), want a refusal that names the limit", limit+1, line, err)
	}
	out.waitFor(t, fmt.Sprintf("agent socket: refused a connection: it holds %d, its limit (1 refused so far)", limit))

	fmt.Fprintf(conns[0], `{"type":"bye","t":%d}`+"\n", time.Now().UnixNano())
	out.waitFor(t, "pid 40000 (train.py): detached")
	// the connection's end is counted once its goroutine is done: retry
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(n, `{"type":"hello","v":1,"pid":%d,"argv":["late.py"],"devices":[],"t":%d}`+"\n", 50000, time.Now().UnixNano())
		n.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		line, _ := bufio.NewReader(n).ReadBytes('\n')
		if len(line) == 0 {
			defer n.Close()
			break
		}
		n.Close()
		if time.Now().After(end) {
			t.Fatalf("no connection taken after one left: %q", line)
		}
	}
	out.waitFor(t, "pid 50000 (late.py): attached")
	if _, err := os.Stat(sock); err != nil {
		t.Fatal(err)
	}
}
