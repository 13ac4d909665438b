package present

import (
	"testing"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

const sec = int64(time.Second)

// a GPU sampled by NVML for 10 s, an NVML-only process, and an agent
// process that reports holders at 5 s and exits at 8 s
func screenStore() *store.Store {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "H200", Total: 100 << 30, Source: "nvml"})
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 42, Argv: []string{"python", "train.py"},
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a", Name: "H200", Total: 100 << 30}}, T: sec})
	for t := int64(0); t <= 10*sec; t += sec / 10 {
		st.AddNVML(0, t, 3<<30, 0)
		st.SetProcs(0, t, []wire.Proc{{PID: 7, Name: "other", Used: 1 << 30}, {PID: 42, Name: "python", Used: 2 << 30}})
		if t >= sec && t < 8*sec {
			st.AgentSample(42, wire.Sample{Type: wire.TypeSample, T: t, Dev: 0, Allocated: 1 << 30, Reserved: 3 << 29, Peak: 1 << 30})
		}
	}
	st.AgentHolders(42, wire.Holders{Type: wire.TypeHolders, T: 5 * sec, Dev: 0, Total: 1 << 30})
	st.AgentEnded(42, 8*sec, true, "")
	return st
}

// In replay the screen is the cursor's moment: the holders report only
// once the cursor has passed it, the process attached until it ended.
func TestScreenReplayAtCursor(t *testing.T) {
	st := screenStore()
	p := NewPresenter()
	at := func(c int64) Screen {
		return p.Screen(st, Query{Cursor: c, Replay: true, From: c - 5*sec, To: c + 1, Cols: 10})
	}
	s := at(4 * sec)
	sel, ok := s.SelectedProcess()
	if !ok || sel.PID != 42 || sel.Status != "attached" || sel.Holders != nil {
		t.Fatalf("at 4 s: selected %+v, %v", sel, ok)
	}
	if len(s.Series) != 4 || s.Series[0].Kind != NVMLUsed || s.Series[3].Kind != TorchAllocated || s.Note != "pid 42" {
		t.Fatalf("at 4 s: series %d, note %q", len(s.Series), s.Note)
	}
	if s.Devices[0].Used == nil || *s.Devices[0].Used != 3<<30 || s.TorchPeak == nil || s.TorchPeakPID != 42 {
		t.Fatalf("at 4 s: header %v, torch peak %v (pid %d)", s.Devices[0].Used, s.TorchPeak, s.TorchPeakPID)
	}
	s = at(9 * sec)
	sel, _ = s.SelectedProcess()
	if sel.PID != 42 || !sel.Ended || sel.Holders == nil || s.Note != "pid 42 exited" {
		t.Fatalf("at 9 s: selected %+v, note %q", sel, s.Note)
	}
}

// A pick stays while its process is there; without one the first agent
// process is selected; an NVML-only pick leaves the torch series out.
func TestScreenPick(t *testing.T) {
	st := screenStore()
	p := NewPresenter()
	s := p.Screen(st, Query{Cursor: 4 * sec, Replay: true, PID: 7, Picked: true, From: 0, To: 4 * sec, Cols: 10})
	if sel, _ := s.SelectedProcess(); sel.PID != 7 || !s.Picked || len(s.Series) != 1 {
		t.Fatalf("picked 7: selected %d, picked %v, %d series, note %q", sel.PID, s.Picked, len(s.Series), s.Note)
	}
	s = p.Screen(st, Query{Cursor: 4 * sec, Replay: true, PID: 99, Picked: true, From: 0, To: 4 * sec, Cols: 10})
	if sel, _ := s.SelectedProcess(); sel.PID != 42 || s.Picked {
		t.Fatalf("a pick that is gone: selected %d, picked %v", sel.PID, s.Picked)
	}
	if s := p.Screen(st, Query{Dev: 5}); s.Dev != 0 {
		t.Fatalf("an unknown GPU should fall back to the first, got %d", s.Dev)
	}
}
