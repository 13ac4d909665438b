package agentlink

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// helperSocketEnv makes this test binary act as an agent in
// TestHelperNamespacedAgent (run by TestAgentInAnotherPIDNamespace).
const helperSocketEnv = "GPUTOP_TEST_NAMESPACED_AGENT_SOCKET"

// TestHelperNamespacedAgent is the agent side of
// TestAgentInAnotherPIDNamespace: started inside a new pid namespace, it
// says hello with the pid it has there, sends one sample and waits for
// gputop to close the connection. Without the variable it does nothing.
func TestHelperNamespacedAgent(t *testing.T) {
	path := os.Getenv(helperSocketEnv)
	if path == "" {
		return
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, f := range []any{
		wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: os.Getpid(), Argv: []string{"train.py"},
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

// An agent in a container says hello with its pid inside the container.
// NVML counts the process by its pid in gputop's namespace, which the
// kernel gives with the connection: the agent must be filed under that
// one, or its allocator numbers and NVML's would never meet in the process
// pane.
func TestAgentInAnotherPIDNamespace(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("this test needs unshare(1) (util-linux) to start a process in a new pid namespace")
	}
	st := newStore(t, true)
	ts := startServer(t, st, nil)
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--pid", "--fork", "--kill-child",
		os.Args[0], "-test.run=^TestHelperNamespacedAgent$")
	cmd.Env = append(os.Environ(), helperSocketEnv+"="+ts.Path())
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

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

// Agents simulated from one process (as the other tests here do) keep the
// pids their hellos give: only a peer in a nested namespace where it has
// the hello's pid is translated.
func TestHostPIDKeepsHelloPIDInTheSameNamespace(t *testing.T) {
	self := os.Getpid()
	for _, c := range []struct{ peer, hello, want int }{
		{self, self, self},
		{self, 501, 501}, // one process, several simulated agents
		{0, 77, 77},      // peer not visible from here
		{-1, 77, 77},
	} {
		if got := hostPID(c.peer, c.hello); got != c.want {
			t.Errorf("hostPID(%d, %d) = %d, want %d", c.peer, c.hello, got, c.want)
		}
	}
}
