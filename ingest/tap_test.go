package ingest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// tapRec records what a Tap is given.
type tapRec struct {
	mu     sync.Mutex
	nvml   []string
	frames []any
}

func (r *tapRec) NVML(dev int, t int64, used, reserved uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nvml = append(r.nvml, fmt.Sprintf("%d@%d:%d/%d", dev, t, used, reserved))
}

func (r *tapRec) Frame(f wire.Frame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, f)
}

func (r *tapRec) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, f := range r.frames {
		out = append(out, reflect.TypeOf(f).Name())
	}
	return out
}

// What the store kept reaches the Tap as frames, in the order it was
// applied; an OOM's row is no frame of its own.
func TestTapReceivesFrames(t *testing.T) {
	st := store.New(store.DefaultOptions())
	in := New(st)
	tap := &tapRec{}
	in.SetTap(tap)
	in.Device(store.Device{Index: 0, UUID: "GPU-0"})
	in.NVML(0, 10, 100, 5)
	in.NVML(0, 11, 101, 5)
	in.Apply(0, wire.DevError{T: 12, Dev: 0, Error: "Not Supported"})
	in.Apply(0, wire.Procs{T: 13, Dev: 0, Procs: []wire.Proc{{PID: 7, Name: "python", Used: 50}}})
	in.Apply(7, wire.Hello{Type: wire.TypeHello, PID: 7, T: 14, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	in.Apply(7, wire.Sample{Type: wire.TypeSample, T: 15, Dev: 0, Allocated: 1})
	in.Apply(7, wire.Mark{T: 16, Label: "m", Devs: []wire.DevStats{{Dev: 0}}})
	in.Apply(7, wire.OOM{T: 17, Dev: 0})
	in.Apply(7, wire.Holders{T: 18})
	in.TakeSnapshot("k", 0, 19, "key", nil)
	in.Apply(7, wire.Ended{T: 20, Reason: "killed"})
	// the OOM's row is no frame of its own: its oom frame is
	want := []string{"Device", "DevError", "Procs", "Hello", "Sample", "Snapshot", "OOM", "Holders", "Snapshot", "Ended"}
	if got := tap.types(); !reflect.DeepEqual(got, want) {
		t.Fatalf("frames %v\nwant %v", got, want)
	}
	if !reflect.DeepEqual(tap.nvml, []string{"0@10:100/5", "0@11:101/5"}) {
		t.Fatalf("nvml %v", tap.nvml)
	}
	if s := tap.frames[4].(wire.Sample); s.PID != 7 {
		t.Fatalf("sample frame without the pid: %+v", s)
	}
	// no NVML sample at or after 19 yet: the row waits for it, and the
	// frame leaves NVML out (a reader computes it from the samples)
	if s := tap.frames[8].(wire.Snapshot); s.Label != "k" || s.PID != 7 || s.Allocated == nil || *s.Allocated != 1 || s.NVMLUsed != nil {
		t.Fatalf("snapshot frame %+v", s)
	}
	if r := st.Snapshots()[2]; r.Label != "k" || r.NVMLUsed == nil || *r.NVMLUsed != 101 {
		t.Fatalf("row k meanwhile shows %+v", r)
	}
}
