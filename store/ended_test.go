package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

// Past KeepEnded ended agents, the one that ended longest ago is
// forgotten: its hello and series go, its rows and markers stay, and so
// does its place in a job while a row names it; the count per device says
// how many went. An agent that comes back is not ended any more.
func TestKeepEndedForgetsTheLongestEnded(t *testing.T) {
	opt := DefaultOptions()
	opt.KeepEnded = 2
	st := New(opt)
	st.SetDevice(Device{Index: 0, UUID: "GPU-a", Name: "H200"})
	st.SetDevice(Device{Index: 1, UUID: "GPU-b", Name: "H200"})
	has := func(pid int) bool { return st.Count(Key{Dev: 0, PID: pid, Metric: Allocated}) > 0 }
	known := func(pid int) bool {
		for _, a := range st.Agents() {
			if a.Hello.PID == pid {
				return true
			}
		}
		return false
	}
	run := func(pid int, at int64, rank string, row bool) {
		h := wire.Hello{PID: pid, T: at, Argv: []string{"job.py"}, Rank: rank,
			Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}}}
		if rank != "" {
			h.WorldSize = "8"
		}
		st.AgentHello(h)
		st.AgentSample(pid, wire.Sample{T: at + 1, Dev: 0, Allocated: 5, Reserved: 6, Peak: 7})
		if row {
			st.AgentMark(pid, wire.Mark{T: at + 2, Label: fmt.Sprintf("row of %d", pid), Devs: []wire.DevStats{{Dev: 0, Allocated: 5}}})
		}
	}
	run(101, 10, "1", true)  // a row and a rank: its place outlives it
	run(102, 20, "2", false) // a rank, no row
	run(103, 30, "", true)   // a row, no place
	run(104, 40, "4", false)
	for i, pid := range []int{101, 102, 103} {
		st.AgentEnded(pid, int64(50+i), i%2 == 0, "gone")
	}
	if known(101) || !known(102) || !known(103) || !known(104) {
		t.Fatalf("after 3 ends with KeepEnded 2: agents %v", st.Agents())
	}
	if has(101) || !has(102) {
		t.Errorf("the forgotten agent's series stay, or a kept one's went")
	}
	if n0, n1 := st.EndedForgotten(0), st.EndedForgotten(1); n0 != 1 || n1 != 1 {
		t.Errorf("EndedForgotten = %d, %d; want 1 on each of its devices", n0, n1)
	}
	rows := 0
	for _, r := range st.Rows() {
		if r.PID == 101 {
			rows++
		}
	}
	if rows != 1 {
		t.Errorf("the forgotten agent's row went (%d left)", rows)
	}
	if p := st.Places()[101]; p.Rank != 1 || p.WorldSize != 8 {
		t.Errorf("forgotten 101's place = %+v, want rank 1 of 8 (its row names it)", p)
	}

	// 102 comes back (a pid reused): it is not ended any more, so 104's
	// end leaves two ended (103, 104), and 102's next end forgets 103
	run(102, 60, "2", false)
	st.AgentEnded(104, 70, true, "")
	if !known(102) || !known(103) || !known(104) {
		t.Fatalf("after 102 came back and 104 ended: agents %v", st.Agents())
	}
	st.AgentEnded(102, 80, true, "")
	st.AgentEnded(102, 81, true, "") // a second end of the same agent changes nothing
	if known(103) || !known(104) || !known(102) || st.EndedForgotten(0) != 2 {
		t.Errorf("agents %v, forgotten %d; want 103 forgotten, 2 in all", st.Agents(), st.EndedForgotten(0))
	}
	if _, ok := st.Places()[103]; ok {
		t.Errorf("103 gave no place but has one")
	}
	run(105, 90, "5", false)
	st.AgentEnded(105, 91, true, "")
	if known(104) {
		t.Errorf("104 kept past KeepEnded")
	}
	if _, ok := st.Places()[104]; ok {
		t.Errorf("104 had no row, yet its place outlives it")
	}
}

// 0 keeps every agent (a replay shows a recording whole).
func TestKeepEndedZeroKeepsEveryAgent(t *testing.T) {
	opt := DefaultOptions()
	opt.KeepEnded = 0
	st := New(opt)
	for pid := 1; pid <= 100; pid++ {
		st.AgentHello(wire.Hello{PID: pid, T: int64(pid), Devices: []wire.AgentDevice{}})
		st.AgentEnded(pid, int64(pid)+1, true, "")
	}
	if n := len(st.Agents()); n != 100 {
		t.Fatalf("%d agents kept, want 100", n)
	}
}

// A hello's text is kept small where it enters the store: its argv to
// MaxArgs arguments and MaxArgvBytes, the rest of its text to
// MaxHelloText each; the log names the process and what was cut, and what
// the store returns (what a recording holds) is the kept hello.
func TestHelloTextBounded(t *testing.T) {
	var logs []string
	opt := DefaultOptions()
	opt.Log = func(l string) { logs = append(logs, l) }
	st := New(opt)
	big := strings.Repeat("é", 1<<19) // 1 MiB
	argv := []string{"/usr/bin/python3", "train.py", big, "--lr"}
	h, _ := st.AgentHello(wire.Hello{PID: 7, T: 1, Argv: argv, Torch: big, Host: big, Python: big, HistoryError: big,
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a", Name: big}}})
	total := 0
	for _, a := range h.Argv {
		total += len(a) + 1
	}
	if total-1 > MaxArgvBytes || len(h.Argv) != 3 || h.Argv[1] != "train.py" || !strings.HasSuffix(h.Argv[2], "…") {
		t.Errorf("argv kept as %d arguments, %d bytes (%q…)", len(h.Argv), total-1, h.Argv[:2])
	}
	for name, s := range map[string]string{"torch": h.Torch, "host": h.Host, "python": h.Python,
		"history_error": h.HistoryError, "device name": h.Devices[0].Name} {
		if len(s) > MaxHelloText || !strings.HasSuffix(s, "…") {
			t.Errorf("%s kept as %d bytes", name, len(s))
		}
	}
	if a := st.Agents()[0]; len(a.Hello.Argv) != 3 || len(a.Hello.Torch) > MaxHelloText {
		t.Errorf("the store keeps more than it returned")
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "pid 7: hello: argv of 4 arguments (1048607 bytes) kept to 3 arguments") {
		t.Errorf("log %q", logs)
	}

	many := make([]string, 1000)
	for i := range many {
		many[i] = "-x"
	}
	h, _ = st.AgentHello(wire.Hello{PID: 8, T: 1, Argv: many, Devices: []wire.AgentDevice{}})
	if len(h.Argv) != MaxArgs {
		t.Errorf("%d arguments kept, want %d", len(h.Argv), MaxArgs)
	}
	h, _ = st.AgentHello(wire.Hello{PID: 9, T: 1, Argv: []string{"python", "train.py"}, Devices: []wire.AgentDevice{}})
	if len(h.Argv) != 2 || len(logs) != 2 {
		t.Errorf("a short argv was changed (%q) or logged (%q)", h.Argv, logs)
	}
}
