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
	want := []string{"Device", "DevError", "Procs", "Hello", "Sample", "Row", "OOM", "Holders", "Row", "Ended"}
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
	if s := tap.frames[8].(wire.Row); s.Label != "k" || s.PID != 7 || s.Allocated == nil || *s.Allocated != 1 || s.NVMLUsed != nil {
		t.Fatalf("snapshot frame %+v", s)
	}
	if r := st.Rows()[2]; r.Label != "k" || r.NVMLUsed == nil || *r.NVMLUsed != 101 {
		t.Fatalf("row k meanwhile shows %+v", r)
	}
}

// seqTap records NVML samples and frames in one sequence, as the recorder
// queues them.
type seqTap struct {
	mu  sync.Mutex
	seq []any
}

func (s *seqTap) NVML(dev int, t int64, used, reserved uint64) {
	s.mu.Lock()
	s.seq = append(s.seq, t)
	s.mu.Unlock()
}

func (s *seqTap) Frame(f wire.Frame) {
	s.mu.Lock()
	s.seq = append(s.seq, f)
	s.mu.Unlock()
}

// With the sampler and agents writing at once, the Tap sees changes in the
// order the store made them and each change whole: the devices a hello
// adds come right before that hello, with nothing between them (a loader
// takes the devices right before a hello for that hello's), and device
// indices only grow (the store numbers them in the order it adds them).
func TestTapKeepsEachChangeTogether(t *testing.T) {
	st := store.New(store.Options{RawCapacity: 1000})
	in := New(st)
	tap := &seqTap{}
	in.SetTap(tap)
	in.Device(store.Device{Index: 0, UUID: "GPU-nvml"})
	const agents, per = 4, 30
	var wg, hellos sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			in.NVML(0, int64(i), uint64(i), 0)
		}
	})
	for a := range agents {
		hellos.Go(func() {
			for i := range per {
				pid := 1000 + a*per + i
				h := wire.Hello{PID: pid, T: int64(i), Devices: []wire.AgentDevice{
					{Index: 0, UUID: fmt.Sprintf("GPU-%d-a", pid)}, {Index: 1, UUID: fmt.Sprintf("GPU-%d-b", pid)}}}
				in.Apply(pid, h)
			}
		})
	}
	hellos.Wait()
	close(done)
	wg.Wait()
	seen, lastDev := 0, -1
	for i, x := range tap.seq {
		if d, ok := x.(wire.Device); ok {
			if d.Index <= lastDev {
				t.Fatalf("device %d (%s) reported after device %d", d.Index, d.UUID, lastDev)
			}
			lastDev = d.Index
		}
		h, ok := x.(wire.Hello)
		if !ok {
			continue
		}
		seen++
		for back, uuid := range []string{fmt.Sprintf("GPU-%d-b", h.PID), fmt.Sprintf("GPU-%d-a", h.PID)} {
			d, ok := tap.seq[i-1-back].(wire.Device)
			if !ok || d.UUID != uuid {
				t.Fatalf("hello of pid %d: %d before it is %#v, want the device %s", h.PID, back+1, tap.seq[i-1-back], uuid)
			}
		}
	}
	if seen != agents*per {
		t.Fatalf("%d hellos reported, want %d", seen, agents*per)
	}
}

// A layout frame goes onto the store, filed under the process, and to the
// Tap as kept (pid filled in, text printable); a row made later takes it.
// One the store cannot place (no hello, a device not listed) reaches
// neither.
func TestLayoutReachesStoreAndTap(t *testing.T) {
	st := store.New(store.DefaultOptions())
	in := New(st)
	tap := &tapRec{}
	in.SetTap(tap)
	in.Apply(7, wire.LayoutReading{Dev: 0, Layout: wire.Layout{T: 5, Reserved: 10, FreeInSegments: 6, LargestFree: 4}})
	in.Apply(7, wire.Hello{Type: wire.TypeHello, PID: 7, T: 10, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	in.Apply(7, wire.Sample{Type: wire.TypeSample, T: 11, Dev: 0, Allocated: 4, Reserved: 10})
	in.Apply(7, wire.LayoutReading{Dev: 0, Layout: wire.Layout{T: 12, Segments: 2, Reserved: 10, Allocated: 4, FreeInSegments: 6, LargestFree: 4,
		Pools: []wire.Pool{{Kind: wire.PoolGraph, ID: "1,\x1b[2J2", Reserved: 10}}}})
	in.Apply(7, wire.LayoutReading{Dev: 1, Layout: wire.Layout{T: 13}})
	in.Apply(7, wire.LayoutReading{Dev: 0, Skipped: "took too long", Layout: wire.Layout{T: 14}})
	rows := in.TakeSnapshot("k", 0, 15, "key", nil)

	want := []string{"Device", "Hello", "Sample", "LayoutReading", "LayoutReading", "Row"}
	if got := tap.types(); !reflect.DeepEqual(got, want) {
		t.Fatalf("frames %v\nwant %v", got, want)
	}
	r := tap.frames[3].(wire.LayoutReading)
	if r.PID != 7 || r.Dev != 0 || r.T != 12 || r.LargestFree != 4 || len(r.Pools) != 1 || r.Pools[0].ID == "1,\x1b[2J2" {
		t.Errorf("the tap's layout frame %+v: want pid 7, torch device 0, the pool's id printable", r)
	}
	if s := tap.frames[4].(wire.LayoutReading); s.Skipped != "took too long" || s.PID != 7 {
		t.Errorf("the tap's skip frame %+v", s)
	}
	at := st.LayoutAt(7, 0, 15)
	if !at.OK || at.Layout.T != 12 || at.Layout.Segments != 2 || at.Skipped != "took too long" || at.SkippedAt != 14 {
		t.Errorf("the store's layout at 15: %+v", at)
	}
	if len(rows) != 1 || rows[0].Layout == nil || rows[0].Layout.T != 12 {
		t.Errorf("the key's row %+v: want the layout read at 12", rows)
	}
	if s := tap.frames[5].(wire.Row); s.Layout == nil || s.Layout.Segments != 2 {
		t.Errorf("the tap's row has layout %+v", s.Layout)
	}
}
