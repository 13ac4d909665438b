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

// A JAX process's figures in the pane are the newest reading at the
// question's time: live the newest, in a replay the one before the cursor.
func TestProcessesCarryFrameworksAtTheCursor(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "H200", Source: "nvml"})
	st.AgentHello(wire.Hello{PID: 9, T: 1000, Argv: []string{"jax_train.py"}, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}}})
	for i, v := range []uint64{100, 200, 300} {
		st.AgentFramework(9, wire.FrameworkReading{T: int64(2000 + 1000*i), Dev: 0, Frameworks: []wire.Framework{{
			Name: "jax", Figures: []wire.Figure{{Of: wire.FigInUse, Native: "bytes_in_use", Value: v}}}}})
	}
	in := func(ps []Process) uint64 {
		if len(ps) != 1 || len(ps[0].Frameworks) != 1 {
			t.Fatalf("processes %+v", ps)
		}
		g, _ := ps[0].Frameworks[0].Get(wire.FigInUse)
		return g.Value
	}
	if live, _ := Processes(st, 0, 2500, false); in(live) != 300 {
		t.Errorf("live: %d, want the newest, 300", in(live))
	}
	if replay, _ := Processes(st, 0, 3500, true); in(replay) != 200 {
		t.Errorf("replay at 3500: %d, want 200", in(replay))
	}
}
