package recording

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Layout frames are written as the store kept them and loaded back: a
// replay at any cursor sees the layout the live store had then (a skip's
// reason included), and the rows' layouts (a mark's, an OOM's from its
// oom frame, a key's from the readings) come back the same.
func TestLayoutRoundTrip(t *testing.T) {
	path, w, live := liveH200(t, "layout.gputop")
	exp := true
	settings := &wire.AllocSettings{From: "torch", Expandable: &exp, Items: []wire.Setting{{Name: "garbage_collection_threshold", Value: "0.8"}}}
	layout := func(i int, pools ...wire.Pool) wire.Layout {
		free := uint64(i+1) << 20
		return wire.Layout{T: base + int64(i)*1000*ms, Segments: 4 + i, Blocks: 10 + i, Reserved: 64 << 20, Allocated: 64<<20 - free,
			FreeInSegments: free, LargestFree: free / 2, Pools: pools, Settings: settings, TookMS: 1.5}
	}
	graph := wire.Pool{Kind: wire.PoolGraph, ID: "1,7", Segments: 1, Reserved: 8 << 20, Allocated: 2 << 20, LargestFree: 1 << 20}
	def := wire.Pool{Kind: wire.PoolDefault, ID: "0,0", Segments: 3, Reserved: 56 << 20}
	for i := range 10 {
		live.AddNVML(0, base+int64(i)*1000*ms+500*ms, uint64(i)<<30, 0)
		switch i {
		case 4:
			live.in.Apply(4242, wire.LayoutReading{Dev: 0, Skipped: "the reading took 60 ms, over the 50 ms bound", Layout: wire.Layout{T: base + 4000*ms}})
		case 6:
			own := layout(6, def)
			own.T += 100 * ms
			live.AgentMark(4242, wire.Mark{T: base + 6100*ms, Label: "Epoch 1", Devs: []wire.DevStats{{Dev: 0, Allocated: 1, Reserved: 2, Peak: 3, Layout: &own}}})
		case 7:
			own := layout(7, def, graph)
			own.T += 200 * ms
			live.AgentOOM(4242, wire.OOM{T: base + 7200*ms, Dev: 0, Requested: 1 << 30, Allocated: 1, Reserved: 2, Peak: 3, Layout: &own})
			live.AgentOOM(4242, wire.OOM{T: base + 7300*ms, Dev: 0, Requested: 1 << 30, Allocated: 1, Reserved: 2, Peak: 3})
		default:
			live.in.Apply(4242, wire.LayoutReading{Dev: 0, Layout: layout(i, def, graph)})
		}
		live.AgentSample(4242, wire.Sample{T: base + int64(i)*1000*ms + 10*ms, Dev: 0, Allocated: 5, Reserved: 6, Peak: 7})
	}
	live.TakeSnapshot("key", 0, base+8500*ms, "key", nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	data := readFile(t, path)
	if n := bytes.Count(data, []byte(`{"type":"layout","pid":4242,"dev":0,`)); n != 8 {
		t.Errorf("%d layout lines with the process, want 8 (7 readings, a skip)", n)
	}
	loaded := store.New(replayOptions())
	info, err := Load(path, loaded)
	if err != nil {
		t.Fatal(err)
	}
	if info.Skipped != 0 {
		t.Errorf("%d frames skipped", info.Skipped)
	}
	// a replay at every cursor sees what live saw then
	for at := base - 500*ms; at <= base+10_000*ms; at += 250 * ms {
		if a, b := live.LayoutAt(4242, 0, at), loaded.LayoutAt(4242, 0, at); !reflect.DeepEqual(a, b) {
			t.Fatalf("the layout at %d ms:\n live   %+v\n loaded %+v", (at-base)/ms, a, b)
		}
	}
	at := loaded.LayoutAt(4242, 0, base+4500*ms)
	if !at.OK || at.Layout.T != base+3000*ms || !strings.Contains(at.Skipped, "over the 50 ms bound") || len(at.Layout.Pools) != 2 ||
		at.Layout.Settings == nil || *at.Layout.Settings.Expandable != true {
		t.Errorf("the replay at 4.5 s: %+v", at)
	}
	if a, b := live.Columns(store.Key{Dev: 0, PID: 4242, Metric: store.LargestFree}, base, base+10_000*ms, 10),
		loaded.Columns(store.Key{Dev: 0, PID: 4242, Metric: store.LargestFree}, base, base+10_000*ms, 10); !reflect.DeepEqual(a, b) || !a[9].OK {
		t.Errorf("largest free series:\n live   %+v\n loaded %+v", a, b)
	}
	// rows: the mark's own, each OOM's (the observer's; the newest
	// reading), the key's
	want := map[string]int64{"Epoch 1": base + 6100*ms, "key": base + 8000*ms}
	var ooms []int64
	for _, r := range loaded.Rows() {
		if r.Layout == nil {
			t.Errorf("row %q loaded without its layout", r.Label)
			continue
		}
		if r.Label == wire.LabelOOM {
			ooms = append(ooms, r.Layout.T)
		} else if r.Layout.T != want[r.Label] {
			t.Errorf("row %q has the layout read at %d ms, want %d", r.Label, (r.Layout.T-base)/ms, (want[r.Label]-base)/ms)
		}
	}
	if !reflect.DeepEqual(ooms, []int64{base + 7200*ms, base + 5000*ms}) {
		t.Errorf("OOM rows' layouts read at %v, want the observer's and then the newest reading's", ooms)
	}
	a, b := live.Rows(), loaded.Rows()
	if len(a) != 4 || len(b) != len(a) {
		t.Fatalf("%d rows live, %d loaded; want 4", len(a), len(b))
	}
	for i := range a {
		a[i].OOM, b[i].OOM = nil, nil // the frame as this test sent it, and as loaded
		if !reflect.DeepEqual(a[i], b[i]) {
			t.Errorf("row %d differs:\n live   %#v\n loaded %#v", i, a[i], b[i])
		}
	}
}
