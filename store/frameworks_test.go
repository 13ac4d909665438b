package store

import (
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

func jaxReading(at int64, inUse uint64) wire.FrameworkReading {
	return wire.FrameworkReading{Dev: 0, T: at, Frameworks: []wire.Framework{{Name: "jax\x1b[2J",
		Figures: []wire.Figure{{Of: wire.FigInUse, Native: "bytes_in_use", Value: inUse}}}}}
}

// A process-device keeps its newest FrameworkReadings readings as they
// came and, older, the first of each minute: the figures at a time are
// the newest reading then, live and replay alike; what falls out is
// counted; text from the agent is made printable.
func TestFrameworkReadingsOverTime(t *testing.T) {
	st := layoutAgent(t, DefaultOptions())
	const step = 100 * 1000 * 1000 // 10 a second, as the agent sends them
	n := FrameworkReadings + 1200  // two minutes past the ring
	for i := range n {
		if _, ok := st.AgentFramework(7, jaxReading(sec+int64(i)*step, uint64(i))); !ok {
			t.Fatalf("reading %d not kept", i)
		}
	}
	if _, ok := st.AgentFramework(99, jaxReading(sec, 1)); ok {
		t.Fatal("a reading of an unknown process was kept")
	}
	last := st.LatestFrameworks(7, 1)
	if !last.OK || last.Frameworks[0].Figures[0].Value != uint64(n-1) || strings.ContainsRune(last.Frameworks[0].Name, 0x1b) {
		t.Fatalf("newest: %+v", last)
	}
	mid := st.FrameworksAt(7, 1, sec+int64(n-10)*step+step/2)
	if !mid.OK || mid.Frameworks[0].Figures[0].Value != uint64(n-10) {
		t.Fatalf("at a time in the ring: %+v", mid)
	}
	// before the ring: the first reading of its minute, not a later one
	old := st.FrameworksAt(7, 1, sec+5*step)
	if !old.OK || old.Frameworks[0].Figures[0].Value != 0 {
		t.Fatalf("before the ring: %+v", old)
	}
	if d := st.Bounds().FrameworksDropped; d == 0 || d >= 1200 {
		t.Fatalf("FrameworksDropped %d: want the readings thinned out of the ring, fewer than %d", d, 1200)
	}
	if st.FrameworksAt(7, 0, sec*1000).OK {
		t.Fatal("figures on a device the process does not use")
	}
}

// A mark's device that only JAX or CuPy initialised makes a row without
// torch figures (never zeros), with the framework's own.
func TestAMarkOfAFrameworkDeviceHasNoTorchFigures(t *testing.T) {
	st := layoutAgent(t, DefaultOptions())
	fw := []wire.Framework{{Name: "cupy", Figures: []wire.Figure{{Of: wire.FigInUse, Native: "used_bytes", Value: 5}}}}
	rows := st.AgentMark(7, wire.Mark{T: 2 * sec, Label: "step", Devs: []wire.DevStats{{Dev: 0, NoTorch: true, Frameworks: fw}}})
	if len(rows) != 1 || rows[0].Allocated != nil || rows[0].Reserved != nil || rows[0].Peak != nil ||
		len(rows[0].Frameworks) != 1 || rows[0].Frameworks[0].Figures[0].Value != 5 {
		t.Fatalf("rows %+v", rows)
	}
}

// A row taken with a key (or gputop snap) carries each process's newest
// framework figures then; a JAX-only process gets a row of its own,
// without torch figures and without a torch walk asked for.
func TestAKeyRowCarriesTheFrameworks(t *testing.T) {
	st := layoutAgent(t, DefaultOptions())
	st.AgentFramework(7, jaxReading(2*sec, 1234))
	st.AgentFramework(7, jaxReading(4*sec, 5678))
	rows, asks := st.TakeSnapshot("look", 1, 3*sec, "key", nil, true)
	if len(rows) != 1 || rows[0].PID != 7 || rows[0].Allocated != nil || len(asks) != 0 {
		t.Fatalf("rows %+v, asks %+v", rows, asks)
	}
	if f := rows[0].Frameworks; len(f) != 1 || f[0].Figures[0].Value != 1234 {
		t.Fatalf("frameworks %+v: want the reading of 2 s", f)
	}
}

// An end row taken with a key in a JAX-only process asks its agent for a
// walk (none is asked for a row that is no end row): the answer's
// frameworks give the row what holds JAX's memory, its figures staying
// those of the row's time, and the attribution handed on (a recording's
// held frame) carries them.
func TestAKeyEndRowTakesTheFrameworksHoldersFromTheWalk(t *testing.T) {
	st := layoutAgent(t, DefaultOptions())
	st.AgentFramework(7, jaxReading(2*sec, 1234))
	rows, asks := st.TakeSnapshot("After cleanup", 1, 3*sec, "key", nil, true)
	if len(rows) != 1 || !rows[0].Awaiting || len(asks) != 1 || asks[0].PID != 7 || asks[0].TorchDev != 0 {
		t.Fatalf("rows %+v, asks %+v", rows, asks)
	}
	walk := []wire.Framework{{Name: "jax\x1b[2J", Figures: []wire.Figure{{Of: wire.FigInUse, Native: "bytes_in_use", Value: 999}},
		Held: []wire.HolderGroup{{Kind: "variable", Name: "params\x1b[2J", Bytes: 1234, Tensors: 1}}}}
	_, given, ok := st.AgentHolders(7, wire.Holders{T: 3*sec + 5, Dev: 0,
		Held: &wire.Held{T: 3*sec + 5, Skipped: "torch has not initialised cuda:0 in this process"}, Frameworks: walk})
	clean := func(s string) bool { return strings.HasPrefix(s, "params") && !strings.ContainsRune(s, 0x1b) }
	if !ok || len(given) != 1 || len(given[0].Frameworks) != 1 || !clean(given[0].Frameworks[0].Held[0].Name) {
		t.Fatalf("given %+v", given)
	}
	got := st.Rows()[0]
	f := got.Frameworks
	if len(f) != 1 || f[0].Figures[0].Value != 1234 || len(f[0].Held) != 1 || !clean(f[0].Held[0].Name) {
		t.Fatalf("row's frameworks %+v: want the row's figures with the walk's holders", f)
	}
	if rows, asks := st.TakeSnapshot("look", 1, 4*sec, "key", nil, true); len(asks) != 0 || rows[0].Awaiting {
		t.Fatalf("a row that is no end row asked for a walk: %+v %+v", rows, asks)
	}
}
