package recording

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Ledgers are recorded with the rows that carry them and, where a
// holders walk answered after the row (an end row, a key's row), in the
// held frame of its answer; loading gives every row its ledger again.
func TestLedgerRoundTrip(t *testing.T) {
	path, w, live := liveH200(t, "ledger.gputop")
	var asked int
	live.SetAsker(func(pid, torchDev int) error { asked++; return nil })
	ledger := func(t int64, params uint64) *wire.Ledger {
		return &wire.Ledger{T: t, Allocated: 5 << 20, Reserved: 8 << 20, Params: params, Grads: 1 << 20, Optimizer: 1 << 20,
			Activations: 512 << 10, OtherTensors: 256 << 10, Workspace: 128 << 10, Uncounted: []string{"a tensor freed during the walk"}, TookMS: 3.5}
	}
	for i := range 5 {
		live.AgentSample(4242, wire.Sample{T: base + int64(i)*100*ms, Dev: 0, Allocated: 5 << 20, Reserved: 8 << 20, Peak: 6 << 20})
	}
	live.AgentMark(4242, wire.Mark{T: base + 150*ms, Label: "step 1",
		Devs: []wire.DevStats{{Dev: 0, Allocated: 5 << 20, Reserved: 8 << 20, Peak: 6 << 20, Ledger: ledger(base+150*ms, 1<<20)}}})
	live.TakeSnapshot("key", 0, base+250*ms, "key", nil)
	live.TakeSnapshot("After cleanup", 0, base+300*ms, "key", nil)
	if asked != 2 {
		t.Fatalf("asked for %d walks, want 2 (the key's row, the end row)", asked)
	}
	live.AgentHolders(4242, wire.Holders{Type: wire.TypeHolders, T: base + 350*ms, Dev: 0,
		Held: &wire.Held{T: base + 340*ms, Allocated: 5 << 20, Python: 5 << 20}, Ledger: ledger(base+340*ms, 2<<20)})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	data := readFile(t, path)
	if n := bytes.Count(data, []byte(`"type":"held"`)); n != 2 || bytes.Count(data, []byte(`"ledger":{"t":`)) != 4 {
		t.Fatalf("%d held frames, want 2, each with the walk's ledger (and the mark's row's, the holders frame's):\n%s", n, data)
	}
	loaded := store.New(replayOptions())
	if _, err := Load(path, loaded); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(live.Rows(), loaded.Rows()) {
		t.Fatalf("rows differ:\n live   %s\n loaded %s", js(live.Rows()), js(loaded.Rows()))
	}
	params := map[string]uint64{}
	for _, r := range loaded.Rows() {
		if r.Ledger == nil || r.Ledger.Skipped != "" || len(r.Ledger.Uncounted) != 1 {
			t.Fatalf("%s loaded with ledger %+v", r.Label, r.Ledger)
		}
		params[r.Label] = r.Ledger.Params
	}
	if params["step 1"] != 1<<20 || params["key"] != 2<<20 || params["After cleanup"] != 2<<20 {
		t.Fatalf("ledgers' params by row: %v", params)
	}
	for _, r := range loaded.Rows() {
		if r.Label == "key" && r.Held != nil {
			t.Errorf("the key's row (no end row) took the walk's attribution: %+v", r.Held)
		}
		if r.Label == "After cleanup" && (r.Held == nil || r.Held.Python != 5<<20) {
			t.Errorf("the end row's attribution: %+v", r.Held)
		}
	}
}
