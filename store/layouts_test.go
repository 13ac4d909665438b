package store

import (
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

// layoutAgent is a store with agent process 7 on torch device 0 = store
// device 1 (NVML's device 0 is another GPU).
func layoutAgent(t *testing.T, opt Options) *Store {
	t.Helper()
	st := New(opt)
	st.SetDevice(Device{Index: 0, UUID: "GPU-a", Source: "nvml"})
	st.SetDevice(Device{Index: 1, UUID: "GPU-b", Source: "nvml"})
	st.AgentHello(wire.Hello{PID: 7, T: sec, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-b"}}})
	return st
}

// reading is a layout of free bytes free whose largest block is half of it.
func reading(at int64, free uint64, pools ...wire.Pool) wire.LayoutReading {
	return wire.LayoutReading{Type: wire.TypeLayout, Dev: 0, Layout: wire.Layout{T: at, Segments: 3, Blocks: 9,
		Reserved: 10 * free, Allocated: 9 * free, FreeInSegments: free, LargestFree: free / 2, Pools: pools}}
}

func TestLayoutAtTime(t *testing.T) {
	st := layoutAgent(t, DefaultOptions())
	for _, r := range []wire.LayoutReading{reading(10*sec, 100), reading(20*sec, 200), reading(30*sec, 300)} {
		if _, ok := st.AgentLayout(7, r); !ok {
			t.Fatalf("reading at %d not kept", r.T)
		}
	}
	skip := wire.LayoutReading{Dev: 0, Skipped: "the reading took 80 ms, over the agent's bound\x1b[2J", Layout: wire.Layout{T: 40 * sec}}
	kept, ok := st.AgentLayout(7, skip)
	if !ok || kept.PID != 7 || strings.ContainsRune(kept.Skipped, 0x1b) {
		t.Fatalf("skip kept as %+v, %v: want its pid filled in and its text printable", kept, ok)
	}
	st.AgentLayout(7, wire.LayoutReading{Dev: 0, Skipped: kept.Skipped, Layout: wire.Layout{T: 45 * sec}})
	st.AgentLayout(7, reading(50*sec, 500))
	// a frame of a device the hello did not list, or of no agent, is not kept
	if _, ok := st.AgentLayout(7, wire.LayoutReading{Dev: 3, Layout: wire.Layout{T: 51 * sec}}); ok {
		t.Fatal("a layout of an unknown torch device was kept")
	}
	if _, ok := st.AgentLayout(8, reading(51*sec, 1)); ok {
		t.Fatal("a layout of a process without a hello was kept")
	}

	for _, c := range []struct {
		at      int64
		ok      bool
		read    int64 // the reading's time
		skipped bool
		since   int64
	}{
		{5 * sec, false, 0, false, 0},
		{10 * sec, true, 10 * sec, false, 0},
		{25 * sec, true, 20 * sec, false, 0},
		{40 * sec, true, 30 * sec, true, 40 * sec},
		{47 * sec, true, 30 * sec, true, 40 * sec}, // one run of skips, since its first
		{55 * sec, true, 50 * sec, false, 0},
	} {
		got := st.LayoutAt(7, 1, c.at)
		if got.OK != c.ok || got.Layout.T != c.read || (got.Skipped != "") != c.skipped || got.SkippedAt != c.since {
			t.Errorf("LayoutAt(%ds) = ok %v, read at %d, skipped %q since %d; want ok %v, read at %d, skipped %v since %d",
				c.at/sec, got.OK, got.Layout.T, got.Skipped, got.SkippedAt, c.ok, c.read, c.skipped, c.since)
		}
	}
	if got := st.LayoutAt(7, 1, 25*sec); got.Layout.FreeInSegments != 200 || got.Layout.LargestFree != 100 || got.Layout.Segments != 3 {
		t.Errorf("the reading at 20 s has %+v", got.Layout)
	}
	if got := st.LatestLayout(7, 1); got.Layout.T != 50*sec || got.Skipped != "" {
		t.Errorf("latest layout %+v", got)
	}
	if got := st.LayoutAt(7, 0, 55*sec); got.OK || got.Skipped != "" {
		t.Errorf("process 7 has no layout on device 0, got %+v", got)
	}
	// the largest free block is a series, one sample per reading
	if v, at, ok := st.Latest(Key{1, 7, LargestFree}); !ok || v != 250 || at != 50*sec {
		t.Errorf("largest free series ends at %d@%d (%v), want 250@50s", v, at, ok)
	}
	if n := st.Count(Key{1, 7, LargestFree}); n != 4 {
		t.Errorf("largest free series has %d samples, want one per reading (4)", n)
	}
	if v, ok := st.ValueAt(Key{1, 7, LargestFree}, 47*sec); !ok || v != 150 {
		t.Errorf("largest free at 47 s = %d, want the 30 s reading's 150", v)
	}

	// the newest frame a skip: the latest layout says so
	st.AgentLayout(7, wire.LayoutReading{Dev: 0, Skipped: "torch 2.0 cannot list its segments", Layout: wire.Layout{T: 60 * sec}})
	if got := st.LatestLayout(7, 1); got.Layout.T != 50*sec || got.Skipped != "torch 2.0 cannot list its segments" || got.SkippedAt != 60*sec {
		t.Errorf("latest layout after a skip %+v", got)
	}
	// a reading from before the newest frame is filed at its time, as
	// samples are, so the history stays in order
	st.AgentLayout(7, reading(55*sec, 700))
	if got := st.LatestLayout(7, 1); got.Layout.FreeInSegments != 700 || got.Layout.T != 60*sec || got.Skipped != "" {
		t.Errorf("a late reading: latest %+v", got)
	}
}

// A layout's text is made printable where it enters; the settings, which
// rarely change, are kept once while they stay the same.
func TestLayoutTextAndSettings(t *testing.T) {
	st := layoutAgent(t, DefaultOptions())
	exp := true
	set := func() *wire.AllocSettings {
		return &wire.AllocSettings{From: "env", Env: "PYTORCH_CUDA_ALLOC_CONF", Conf: "expandable_segments:True\x1b]0;x\a",
			Expandable: &exp, Items: []wire.Setting{{Name: "max_split_size_mb\x07", Value: "128"}}}
	}
	r1 := reading(10*sec, 100, wire.Pool{Kind: wire.PoolGraph, ID: "1,\x1b[31m2", Reserved: 50})
	r1.Settings = set()
	kept, _ := st.AgentLayout(7, r1)
	r2 := reading(11*sec, 100)
	r2.Settings = set()
	st.AgentLayout(7, r2)
	for _, s := range []string{kept.Pools[0].ID, kept.Settings.Conf, kept.Settings.Items[0].Name} {
		if strings.ContainsAny(s, "\x1b\x07") {
			t.Errorf("text kept with control characters: %q", s)
		}
	}
	a, b := st.LayoutAt(7, 1, 10*sec), st.LayoutAt(7, 1, 11*sec)
	if a.Layout.Settings == nil || a.Layout.Settings != b.Layout.Settings {
		t.Errorf("equal settings kept twice: %p and %p", a.Layout.Settings, b.Layout.Settings)
	}
	if r1.Pools[0].ID != "1,\x1b[31m2" {
		t.Errorf("the caller's frame was changed: %q", r1.Pools[0].ID)
	}
}

// A process-device keeps its LayoutReadings newest readings; older ones,
// the first of each minute, LayoutMinutes of them; what falls out is
// counted in Bounds and logged once.
func TestLayoutBoundsCounted(t *testing.T) {
	var logged []string
	opt := DefaultOptions()
	opt.Log = func(l string) { logged = append(logged, l) }
	st := layoutAgent(t, opt)
	// a reading a second: the 300 oldest leave the recent ring, the first
	// of each of their 5 minutes stays
	for i := range LayoutReadings + 300 {
		st.AgentLayout(7, reading(int64(i)*sec, uint64(i+1)))
	}
	if b := st.Bounds(); b.LayoutsDropped != 295 {
		t.Errorf("LayoutsDropped = %d, want 300 past the newest %d less the 5 kept a minute", b.LayoutsDropped, LayoutReadings)
	}
	for _, c := range []struct{ at, read int64 }{
		{0, 0}, {59 * sec, 0}, {90 * sec, 60 * sec}, {299 * sec, 240 * sec}, {300 * sec, 300 * sec}, {1000 * sec, 1000 * sec},
	} {
		if got := st.LayoutAt(7, 1, c.at); !got.OK || got.Layout.T != c.read {
			t.Errorf("LayoutAt(%ds) = reading at %ds (%v), want %ds", c.at/sec, got.Layout.T/sec, got.OK, c.read/sec)
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "newest 2048 readings per device are kept, then one a minute for 1440 minutes") {
		t.Errorf("log %q: want one line saying the bound", logged)
	}

	// a reading a minute: each one leaving the recent ring is its
	// minute's first, until the minutes are full too
	st = layoutAgent(t, DefaultOptions())
	const min = 60 * sec
	for i := range LayoutReadings + LayoutMinutes + 10 {
		st.AgentLayout(7, reading(int64(i)*min, 1))
	}
	if b := st.Bounds(); b.LayoutsDropped != 10 {
		t.Errorf("LayoutsDropped = %d, want the 10 minutes past %d", b.LayoutsDropped, LayoutMinutes)
	}
	if got := st.LayoutAt(7, 1, 9*min); got.OK {
		t.Errorf("a dropped minute still answers: %+v", got.Layout)
	}
	if got := st.LayoutAt(7, 1, 10*min); !got.OK || got.Layout.T != 10*min {
		t.Errorf("the oldest minute kept: %+v", got)
	}
}

// Rows take a layout: a mark's the one it read (or, none read, the newest
// reading at its time), an OOM's the one torch's OOM observer read (or the
// newest reading), a row the store takes the newest reading at its time.
// An ended agent's readings stay for its rows and a replay.
func TestRowsTakeLayouts(t *testing.T) {
	st := layoutAgent(t, DefaultOptions())
	st.AgentSample(7, wire.Sample{T: 2 * sec, Dev: 0, Allocated: 1, Reserved: 2, Peak: 3})
	st.AgentLayout(7, reading(10*sec, 100))
	st.AgentLayout(7, reading(20*sec, 200))
	own := &wire.Layout{T: 25 * sec, Segments: 1, Reserved: 9, FreeInSegments: 4, LargestFree: 4,
		Pools: []wire.Pool{{Kind: wire.PoolMemPool, ID: "3,\x1b[1m0", Reserved: 9}}}

	rows := st.AgentMark(7, wire.Mark{T: 25 * sec, Label: "read", Devs: []wire.DevStats{{Dev: 0, Layout: own}}})
	if l := rows[0].Layout; l == nil || l.T != 25*sec || strings.ContainsRune(l.Pools[0].ID, 0x1b) {
		t.Errorf("a mark's row has layout %+v, want the mark's own, printable", l)
	}
	rows = st.AgentMark(7, wire.Mark{T: 15 * sec, Label: "none read", Devs: []wire.DevStats{{Dev: 0}}})
	if l := rows[0].Layout; l == nil || l.T != 10*sec {
		t.Errorf("a mark without a layout: row has %+v, want the reading at 10 s", l)
	}
	_, row, _ := st.AgentOOM(7, wire.OOM{T: 26 * sec, Dev: 0, Layout: own})
	if row.Layout == nil || row.Layout.T != 25*sec {
		t.Errorf("an OOM's row has layout %+v, want the observer's", row.Layout)
	}
	o, row, _ := st.AgentOOM(7, wire.OOM{T: 27 * sec, Dev: 0})
	if row.Layout == nil || row.Layout.T != 20*sec || o.Layout != nil {
		t.Errorf("an OOM without a layout: row has %+v (want the reading at 20 s), the frame %+v (want none)", row.Layout, o.Layout)
	}
	taken, _ := st.TakeSnapshot("key", 1, 19*sec, "key", nil, false)
	if len(taken) != 1 || taken[0].Layout == nil || taken[0].Layout.T != 10*sec || taken[0].Layout.FreeInSegments != 100 {
		t.Errorf("a key's row: %+v, want the layout read at 10 s", taken)
	}
	taken, _ = st.TakeSnapshot("before any", 1, 5*sec, "key", nil, false)
	if len(taken) != 1 || taken[0].Layout != nil {
		t.Errorf("a row before any reading has layout %+v", taken[0].Layout)
	}

	st.AgentEnded(7, 30*sec, false, "killed")
	end := true
	taken, _ = st.TakeSnapshot("end", 1, 30*sec, "gputop run", &end, true)
	if len(taken) != 1 || taken[0].Layout == nil || taken[0].Layout.T != 20*sec {
		t.Errorf("the end row of an ended agent: %+v, want its last reading", taken)
	}
	if got := st.LayoutAt(7, 1, 21*sec); !got.OK || got.Layout.T != 20*sec {
		t.Errorf("an ended agent's layout at 21 s: %+v", got)
	}
	var kept []wire.Row
	for _, r := range st.Rows() {
		if r.Layout != nil {
			kept = append(kept, r)
		}
	}
	if len(kept) != 6 {
		t.Errorf("%d rows kept with a layout, want all but the one before any reading (6)", len(kept))
	}
}

// An ended agent forgotten past KeepEnded takes its layouts with it.
func TestForgottenAgentsLayoutsGo(t *testing.T) {
	opt := DefaultOptions()
	opt.KeepEnded = 1
	st := layoutAgent(t, opt)
	st.AgentHello(wire.Hello{PID: 8, T: sec, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-b"}}})
	st.AgentLayout(7, reading(10*sec, 100))
	st.AgentLayout(8, reading(10*sec, 100))
	st.AgentEnded(7, 20*sec, true, "")
	if !st.LatestLayout(7, 1).OK {
		t.Fatal("an ended agent's layouts went with its end")
	}
	st.AgentEnded(8, 21*sec, true, "")
	if st.LatestLayout(7, 1).OK || !st.LatestLayout(8, 1).OK {
		t.Errorf("past KeepEnded: pid 7's layout %v (want gone), pid 8's %v (want kept)", st.LatestLayout(7, 1).OK, st.LatestLayout(8, 1).OK)
	}
}
