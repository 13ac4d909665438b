package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// jqExamples are docs/status.md's shell examples that pipe gputop status
// --json into jq, as the doc writes them.
func jqExamples(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/status.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inSh := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case line == "```sh":
			inSh = true
		case strings.HasPrefix(line, "```"):
			inSh = false
		case inSh && strings.Contains(line, "| jq"):
			if !strings.HasPrefix(line, "gputop status --json | jq ") {
				t.Errorf("docs/status.md: a jq example that does not read gputop status --json: %q", line)
			}
			out = append(out, line)
		}
	}
	return out
}

// docs/status.md's jq examples, run as written (sh, the gputop built here
// first on the PATH, $GPUTOP_SOCKET naming a running gputop, Debian's jq)
// against a gputop with an agent attached: each prints, line for line, what
// the report says (from the report's Go types: the attached agents'
// allocated bytes per GPU, not an ended one's last; the ✗ end rows'
// verdicts). An example with a wrong field name, a jq syntax error or a
// quoting mistake fails.
func TestStatusDocJQExamples(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("jq runs docs/status.md's examples: apt-get install jq")
	}
	examples := jqExamples(t)
	sock, _, _ := statusScene(t)
	// and an agent that has ended: its last counters stay in the report,
	// and are no one's memory now
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(c)
	for _, f := range []any{
		wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: 5353, Argv: []string{"old.py"}, T: time.Now().UnixNano(),
			Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-fake-0", Name: "Fake GPU", Total: 80 << 30}}},
		wire.Sample{Type: wire.TypeSample, T: time.Now().UnixNano(), Dev: 0, Allocated: 7 << 30, Reserved: 8 << 30, Peak: 8 << 30},
	} {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	var r wire.StatusReport
	var raw []byte
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, raw = statusJSON(t, sock)
		i := slices.IndexFunc(r.Agents, func(a wire.StatusAgent) bool { return a.PID == 5353 })
		if i >= 0 && r.Agents[i].Connected && len(r.Agents[i].Devices) == 1 && r.Agents[i].Devices[0].Allocated != nil {
			c.Close()
		}
		if i >= 0 && !r.Agents[i].Connected {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the second agent never showed as ended:\n%s", raw)
		}
	}
	var perGPU, held []string
	for _, a := range r.Agents {
		if !a.Connected {
			continue
		}
		for _, d := range a.Devices {
			alloc := "-"
			if d.Allocated != nil {
				alloc = strconv.FormatUint(*d.Allocated, 10)
			}
			perGPU = append(perGPU, fmt.Sprintf("%d %s cuda:%d %s", a.PID, a.Name, d.TorchDev, alloc))
		}
	}
	for _, row := range r.Rows {
		if row.Verdict != nil && row.Verdict.Status == "held" {
			held = append(held, row.Verdict.Text)
		}
	}
	want := [][]string{perGPU, held} // in the doc's order
	if len(examples) != len(want) {
		t.Fatalf("docs/status.md has %d jq examples, and this test knows what %d of them print: %q", len(examples), len(want), examples)
	}
	for i, ex := range examples {
		if len(want[i]) == 0 {
			t.Fatalf("the report gives %q nothing to print:\n%s", ex, raw)
		}
		cmd := exec.Command("sh", "-c", ex)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"), "GPUTOP_SOCKET="+sock)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("%s: %v\n%s", ex, err, stderr.String())
			continue
		}
		if got := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n"); !slices.Equal(got, want[i]) {
			t.Errorf("%s printed\n%q\nwant (from the report)\n%q\nthe report:\n%s", ex, got, want[i], raw)
		}
	}
}
