package present

import (
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

func TestProcName(t *testing.T) {
	if got := ProcName([]string{"/usr/bin/python3", "/home/u/train.py", "--epochs", "10"}); got != "python3 train.py" {
		t.Errorf("ProcName = %q", got)
	}
	if got := ProcName([]string{"-c", "/tmp/gputop.sock"}); got != "python -c" {
		t.Errorf("ProcName(-c) = %q", got)
	}
	if got := ProcName(nil); got != "" {
		t.Errorf("ProcName(nil) = %q", got)
	}
}

// A GPU that ran many short jobs lists the attached processes, the ones
// NVML still lists, and the MaxEndedListed most recently ended; the rest,
// and the agents the store forgot, are counted. A replay counts only what
// it leaves out itself (its store forgets nothing).
func TestEndedProcessesBounded(t *testing.T) {
	opt := store.DefaultOptions()
	opt.KeepEnded = 50
	st := store.New(opt)
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "H200", Source: "nvml"})
	const jobs = 80
	for pid := 1; pid <= jobs; pid++ {
		t0 := int64(pid) * 1000
		st.AgentHello(wire.Hello{PID: pid, T: t0, Argv: []string{"sweep.py"}, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}}})
		st.AgentSample(pid, wire.Sample{T: t0 + 1, Dev: 0, Allocated: 1})
		if pid != 3 && pid != jobs { // 3 is still on the GPU, 80 attached
			st.AgentEnded(pid, t0+2, true, "")
		}
	}
	st.AgentEnded(3, 3002, true, "")
	st.SetProcs(0, jobs*1000, []wire.Proc{{PID: 3, Used: 1 << 30}})

	rows, hidden := Processes(st, 0, jobs*1000+5, false)
	ended, listed := 0, map[int]bool{}
	for _, r := range rows {
		listed[r.PID] = true
		if r.Ended && r.Used == nil {
			ended++
		}
	}
	// 78 ended and gone: the store kept 50 of them (49 with 3 ended but on
	// the GPU), the presenter lists 32
	if ended != MaxEndedListed || !listed[jobs] || !listed[3] || !listed[jobs-1] || listed[jobs-1-MaxEndedListed] {
		t.Fatalf("listed %d ended (want %d), pids %v", ended, MaxEndedListed, listed)
	}
	forgotten := st.EndedForgotten(0)
	if forgotten != jobs-1-50 || hidden != (jobs-2-forgotten)-MaxEndedListed+forgotten {
		t.Errorf("hidden %d, forgotten %d", hidden, forgotten)
	}
	_, hidden = Processes(st, 0, jobs*1000+5, true)
	if hidden != (jobs-2-forgotten)-MaxEndedListed {
		t.Errorf("replay: hidden %d, want what it left out only", hidden)
	}
}

// An agent gputop cannot see is marked so, and shown by its key.
func TestNamespaceLocalProcess(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "H200"})
	for conn := 1; conn <= 2; conn++ {
		st.AgentHello(wire.Hello{PID: store.NamespacePID(conn, 1), T: 1, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}}})
	}
	rows, _ := Processes(st, 0, 2, false)
	if len(rows) != 2 || !rows[0].NSLocal || rows[0].Label != "ns1:1" || rows[1].Label != "ns2:1" {
		t.Fatalf("rows %+v", rows)
	}
}
