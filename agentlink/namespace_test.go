package agentlink

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// helperSocketEnv makes this test binary act as an agent in
// TestHelperNamespacedAgent (run by TestAgentInAnotherPIDNamespace).
const helperSocketEnv = "GPUTOP_TEST_NAMESPACED_AGENT_SOCKET"

// helperHelloPIDEnv, when set, is the pid the helper says hello with
// instead of its own.
const helperHelloPIDEnv = "GPUTOP_TEST_NAMESPACED_AGENT_HELLO_PID"

// TestHelperNamespacedAgent is the agent side of
// TestAgentInAnotherPIDNamespace: started inside a new pid namespace, it
// says hello with the pid it has there (or helperHelloPIDEnv's), sends one
// sample and waits for gputop to close the connection. Without the
// variable it does nothing.
func TestHelperNamespacedAgent(t *testing.T) {
	path := os.Getenv(helperSocketEnv)
	if path == "" {
		return
	}
	pid := os.Getpid()
	if v := os.Getenv(helperHelloPIDEnv); v != "" {
		pid, _ = strconv.Atoi(v)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, f := range []any{
		wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Argv: []string{"train.py"},
			Devices: []wire.AgentDevice{{Index: 0, UUID: uuidA}}, T: t0},
		sample(0, t0+ms, 7<<20),
	} {
		b, _ := json.Marshal(f)
		if _, err := c.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	bufio.NewReader(c).ReadBytes('\n') // until gputop closes
}

// startNamespacedAgent runs TestHelperNamespacedAgent in a new pid (and
// user) namespace, saying hello with helloPID (0: its own pid there).
func startNamespacedAgent(t *testing.T, sock string, helloPID int) *strings.Builder {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("this test needs unshare(1) (util-linux) to start a process in a new pid namespace")
	}
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--pid", "--fork", "--kill-child",
		os.Args[0], "-test.run=^TestHelperNamespacedAgent$")
	cmd.Env = append(os.Environ(), helperSocketEnv+"="+sock)
	if helloPID != 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", helperHelloPIDEnv, helloPID))
	}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return out
}

// An agent in a container says hello with its pid inside the container.
// NVML counts the process by its pid in gputop's namespace, which the
// kernel gives with the connection: the agent must be filed under that
// one, or its allocator numbers and NVML's would never meet in the process
// pane.
func TestAgentInAnotherPIDNamespace(t *testing.T) {
	st := newStore(t, true)
	ts := startServer(t, st, nil)
	out := startNamespacedAgent(t, ts.Path(), 0)

	var a store.Agent
	waitFor(t, "the namespaced agent's hello", func() bool {
		ags := st.Agents()
		if len(ags) == 1 {
			a = ags[0]
		}
		return len(ags) == 1
	})
	pid := a.Hello.PID
	if pid == 1 {
		t.Fatalf("agent filed under its pid inside the namespace (1); output: %s", out)
	}
	ns := nsPID(pid)
	if len(ns) < 2 || ns[0] != pid || ns[len(ns)-1] != 1 {
		t.Fatalf("agent filed under pid %d, whose NSpid is %v; want the helper (pid 1 in its namespace)", pid, ns)
	}
	waitFor(t, "its sample under that pid", func() bool {
		return st.Count(store.Key{Dev: 0, PID: pid, Metric: store.Allocated}) == 1
	})
	line := ts.logs.wait(t, "from another pid namespace")
	if !strings.Contains(line, "pid 1 inside it") {
		t.Errorf("log line %q does not give the pid inside the namespace", line)
	}
}

// An agent in a nested pid namespace whose hello gives a pid that is not
// its own there names no process gputop can see: it is filed under a key
// of its connection, apart from every real pid, and the log says so.
func TestNestedAgentWithAnotherPIDKeyedByConnection(t *testing.T) {
	st := newStore(t, true)
	ts := startServer(t, st, nil)
	self := os.Getpid() // a real pid here, which the agent must not take
	out := startNamespacedAgent(t, ts.Path(), self)
	var a store.Agent
	waitFor(t, "the agent's hello", func() bool {
		ags := st.Agents()
		if len(ags) == 1 {
			a = ags[0]
		}
		return len(ags) == 1
	})
	key := a.Hello.PID
	if store.NamespaceConn(key) != 1 {
		t.Fatalf("agent filed under %d (%s), want its connection's key; output: %s", key, store.PIDText(key), out)
	}
	if _, pid := store.SplitPID(key); pid != self {
		t.Errorf("key %d does not keep the pid the hello gave (%d)", key, self)
	}
	waitFor(t, "its sample under that key", func() bool {
		return st.Count(store.Key{Dev: 0, PID: key, Metric: store.Allocated}) == 1
	})
	ts.logs.wait(t, fmt.Sprintf("from a pid namespace gputop cannot see (pid %d is its own there", self))
}

// Agents simulated from one process (as the other tests here do) keep the
// pids their hellos give; a peer the kernel cannot name (0) has no pid
// gputop can use.
func TestHostPIDKeepsHelloPIDInTheSameNamespace(t *testing.T) {
	self := os.Getpid()
	for _, c := range []struct{ peer, hello, want int }{
		{self, self, self},
		{self, 501, 501}, // one process, several simulated agents
		{0, 77, 0},       // peer not visible from here: a sibling namespace
		{-1, 77, 0},
	} {
		if got := hostPID(c.peer, c.hello); got != c.want {
			t.Errorf("hostPID(%d, %d) = %d, want %d", c.peer, c.hello, got, c.want)
		}
	}
}

// Two agents gputop cannot see, both pid 1 in their namespaces (two
// containers sharing the socket), get two keys: each its connection's,
// neither a real pid nor a remote host's key, both keeping pid 1.
func TestInvisiblePeersKeyedByConnection(t *testing.T) {
	s := &Server{}
	a, b := s.agentKey(0, 1), s.agentKey(0, 1)
	if a == b {
		t.Fatalf("two invisible agents with pid 1 share key %d", a)
	}
	for _, k := range []int{a, b} {
		if host, pid := store.SplitPID(k); host != 0 || pid != 1 || k < 1<<store.NSConnShift {
			t.Errorf("key %d: host %d, pid %d; want a namespace-local key of pid 1", k, host, pid)
		}
	}
	if store.PIDText(a) != "ns1:1" || store.PIDText(b) != "ns2:1" {
		t.Errorf("shown as %q and %q", store.PIDText(a), store.PIDText(b))
	}
	if got := s.agentKey(os.Getpid(), 501); got != 501 {
		t.Errorf("a visible peer's simulated pid became %d", got)
	}
}
