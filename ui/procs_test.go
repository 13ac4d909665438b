package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// After a sweep of short jobs the process pane lists a pane's worth and
// says how many ended processes it leaves out; agents in pid namespaces
// gputop cannot see are shown by their keys, and the pane says what those
// are.
func TestProcessPaneSaysWhatItLeavesOut(t *testing.T) {
	opt := store.DefaultOptions()
	opt.KeepEnded = 40
	st := store.New(opt)
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	dev := []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa"}}
	for i := range 100 {
		t0 := at(time.Duration(i) * 100 * time.Millisecond)
		st.AgentHello(wire.Hello{PID: 1000 + i, T: t0, Argv: []string{"sweep.py"}, Devices: dev})
		st.AgentSample(1000+i, wire.Sample{T: t0 + 1, Dev: 0, Allocated: 1 << 20})
		st.AgentEnded(1000+i, t0+2, true, "")
	}
	for conn := 1; conn <= 2; conn++ {
		key := store.NamespacePID(conn, 1)
		st.AgentHello(wire.Hello{PID: key, T: at(20 * time.Second), Argv: []string{"train.py"}, Devices: dev})
		st.AgentSample(key, wire.Sample{T: at(20*time.Second) + 1, Dev: 0, Allocated: uint64(conn) * 111 << 20})
	}
	m := newModel(t, st, Options{Title: fixTitle}, 160, 50)
	pane := stripANSI(m.procs.View())
	// 100 ended: 60 forgotten by the store, 8 of the 40 it keeps past the
	// pane's 32; those 32 and the two attached listed (the selected one,
	// ns1:1, in view)
	if present.MaxEndedListed != 32 {
		t.Fatalf("MaxEndedListed is %d; the figures below are for 32", present.MaxEndedListed)
	}
	for _, want := range []string{"… and 68 ended", "ns1:1", "nsN:PID: its own pid inside a pid namespace gputop cannot see",
		"of 34 processes"} {
		if !strings.Contains(pane, want) {
			t.Errorf("pane lacks %q:\n%s", want, pane)
		}
	}
	if !strings.Contains(stripANSI(m.chart.View()), "pid ns1:1 (pid inside another pid namespace)") {
		t.Errorf("the chart's note does not say the selected pid is namespace-local:\n%s", stripANSI(m.chart.View()))
	}
}
