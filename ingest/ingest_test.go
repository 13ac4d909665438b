package ingest

import (
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Each frame type lands where the store keeps it, filed under the pid given.
func TestApply(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-0"})
	in := New(st)
	const pid = 77
	in.Apply(pid, wire.Hello{PID: 5, T: 1, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	in.Apply(pid, wire.Sample{PID: 5, T: 2, Dev: 0, Allocated: 10})
	rows := in.Apply(pid, wire.Mark{T: 3, Label: "After cleanup", Devs: []wire.DevStats{{Dev: 0, Allocated: 10,
		Held: &wire.Held{T: 3, Allocated: 10, Python: 10}}}})
	in.Apply(pid, wire.OOM{T: 4, Dev: 0, Requested: 1 << 30})
	in.Apply(pid, wire.Holders{T: 5, Dev: 0, Groups: []wire.HolderGroup{}})
	in.Apply(0, wire.Procs{T: 6, Dev: 0, Procs: []wire.Proc{{PID: pid, Used: 9}}})
	in.Apply(0, wire.DevError{T: 7, Dev: 0, Error: "GPU is lost"})
	in.Apply(pid, wire.Ended{T: 8, Reason: "killed"})
	ag := st.Agents()
	if len(ag) != 1 || ag[0].Hello.PID != pid || ag[0].OOMs != 1 || ag[0].Holders == nil || !ag[0].Ended {
		t.Fatalf("agent %+v", ag)
	}
	if v, ok := st.ValueAt(store.Key{Dev: 0, PID: pid, Metric: store.Allocated}, 2); !ok || v != 10 {
		t.Fatalf("sample not under pid %d: %d %v", pid, v, ok)
	}
	if len(rows) != 1 || !rows[0].End || rows[0].Held == nil {
		t.Fatalf("mark rows %+v", rows)
	}
	snaps := st.Rows()
	if len(snaps) != 2 || snaps[1].OOM == nil {
		t.Fatalf("rows %+v", snaps)
	}
	if p, _ := st.Procs(0); len(p) != 1 || st.Devices()[0].Err != "GPU is lost" {
		t.Fatalf("procs %+v, device %+v", p, st.Devices()[0])
	}
}
