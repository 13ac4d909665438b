package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// A JAX process's pane says what XLA holds in JAX's own names: in use
// beside the pool it preallocated, and the XLA settings that made the
// pool; a CuPy process's, its pool's used and free and what frees it.
// Neither is shown as torch's.
func TestProcessPaneShowsFrameworksInTheirOwnNames(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	dev := []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa"}}
	t0 := at(time.Second)
	st.AgentHello(wire.Hello{PID: 4100, T: t0, Argv: []string{"jax_train.py"}, Devices: dev})
	fig := func(of, native string, v uint64) wire.Figure { return wire.Figure{Of: of, Native: native, Value: v} }
	st.AgentFramework(4100, wire.FrameworkReading{T: t0 + 1, Dev: 0, Frameworks: []wire.Framework{{
		Name: "jax",
		Figures: []wire.Figure{fig("in_use", "bytes_in_use", 12<<20), fig("reserved", "pool_bytes", 113066115072),
			fig("peak", "peak_bytes_in_use", 16<<20), fig("limit", "bytes_limit", 113066115072)},
		Settings: []wire.Setting{{Name: "XLA_PYTHON_CLIENT_PREALLOCATE"}, {Name: "XLA_PYTHON_CLIENT_MEM_FRACTION"}, {Name: "XLA_PYTHON_CLIENT_ALLOCATOR"}},
	}}})
	m := newModel(t, st, Options{Title: fixTitle}, 160, 50)
	pane := strings.Join(strings.Fields(stripANSI(m.procs.View())), " ")
	for _, want := range []string{
		"pid 4100, jax: bytes_in_use 12.0 MiB in use of the pool_bytes 105.3 GiB it holds (0%), peak_bytes_in_use 16.0 MiB, bytes_limit 105.3 GiB",
		"XLA settings: none set: XLA preallocated 75% at its start, which NVML counts as used; XLA_PYTHON_CLIENT_PREALLOCATE=false grows the pool as needed",
	} {
		if !strings.Contains(pane, want) {
			t.Errorf("pane lacks %q:\n%s", want, pane)
		}
	}
	if strings.Contains(pane, "torch") {
		t.Errorf("a JAX process's figures called torch's:\n%s", pane)
	}
	// its row: the figures in the selected row's details, in JAX's names
	st.AgentMark(4100, wire.Mark{T: t0 + 5, Label: "step 1", Devs: []wire.DevStats{{Dev: 0, NoTorch: true,
		Frameworks: []wire.Framework{{Name: "jax", Figures: []wire.Figure{fig("in_use", "bytes_in_use", 7<<20)}}}}}})
	m = send(t, newModel(t, st, Options{Title: fixTitle}, 160, 50), press("tab", "g")...)
	if rows := strings.Join(strings.Fields(stripANSI(m.table.View())), " "); !strings.Contains(rows, "frameworks: jax bytes_in_use=7340032") {
		t.Errorf("the row's details lack its JAX figures:\n%s", rows)
	}

	st.AgentFramework(4100, wire.FrameworkReading{T: t0 + 2, Dev: 0, Frameworks: []wire.Framework{{
		Name: "jax", Figures: []wire.Figure{fig("in_use", "bytes_in_use", 1<<20), fig("reserved", "bytes_reserved", 2<<20)},
		Settings: []wire.Setting{{Name: "XLA_PYTHON_CLIENT_PREALLOCATE", Value: "false"}},
	}, {
		Name: "cupy", Figures: []wire.Figure{fig("in_use", "used_bytes", 3<<20), fig("reserved", "total_bytes", 8<<20)},
	}}})
	m = newModel(t, st, Options{Title: fixTitle}, 160, 50)
	pane = strings.Join(strings.Fields(stripANSI(m.procs.View())), " ")
	for _, want := range []string{
		"XLA settings: XLA_PYTHON_CLIENT_PREALLOCATE=false: no preallocation, the pool grows as arrays need it",
		"pid 4100, cupy: used_bytes 3.0 MiB in use of the total_bytes 8.0 MiB it holds (38%); 5.0 MiB free in the pool until cupy.get_default_memory_pool().free_all_blocks()",
	} {
		if !strings.Contains(pane, want) {
			t.Errorf("pane lacks %q:\n%s", want, pane)
		}
	}
}

// A process with JAX's (or CuPy's) figures and none of torch's shows
// them in the process table where torch's would be, each cell naming the
// framework, and the chart draws them as series named by the framework's
// own figures; never as torch's.
func TestAFrameworkProcessFillsTheTableAndTheChart(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	dev := []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa"}}
	t0 := at(time.Second)
	st.AgentHello(wire.Hello{PID: 4100, T: t0, Argv: []string{"jax_train.py"}, Devices: dev})
	fig := func(of, native string, v uint64) wire.Figure { return wire.Figure{Of: of, Native: native, Value: v} }
	for i := range 20 {
		st.AgentFramework(4100, wire.FrameworkReading{T: t0 + int64(i)*1e8, Dev: 0, Frameworks: []wire.Framework{{
			Name:    "jax",
			Figures: []wire.Figure{fig("in_use", "bytes_in_use", uint64(12+i)<<20), fig("reserved", "pool_bytes", 113066115072)},
		}}})
	}
	m := newModel(t, st, Options{Title: fixTitle}, 160, 50)
	pane := strings.Join(strings.Fields(stripANSI(m.procs.View())), " ")
	if !strings.Contains(pane, "4100 jax_train.py — jax 31.0 MiB jax 105.3 GiB — attached") {
		t.Errorf("the table lacks JAX's figures in torch's place:\n%s", pane)
	}
	chart := strings.Join(strings.Fields(stripANSI(m.chart.View())), " ")
	for _, want := range []string{"held (jax pool_bytes)", "in use (jax bytes_in_use)"} {
		if !strings.Contains(chart, want) {
			t.Errorf("the chart lacks %q:\n%s", want, chart)
		}
	}
	if strings.Contains(chart, "(torch)") {
		t.Errorf("a JAX process charted as torch's:\n%s", chart)
	}
}

// A JAX process's rows have no torch figures: the table's torch columns
// say "no torch", not "no agent", and the footnote says why they are empty.
func TestAFrameworkProcessRowsSayNoTorch(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	t0 := at(time.Second)
	st.AgentHello(wire.Hello{PID: 4100, T: t0, Argv: []string{"jax_train.py"}, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa"}}})
	jax := []wire.Framework{{Name: "jax", Figures: []wire.Figure{{Of: "in_use", Native: "bytes_in_use", Value: 12 << 20}}}}
	for i, label := range []string{"Epoch 1", "Epoch 2"} {
		st.AgentMark(4100, wire.Mark{T: t0 + int64(i+1)*1e9, Label: label, Kind: wire.MarkSnapshot,
			Devs: []wire.DevStats{{Dev: 0, NoTorch: true, Frameworks: jax}}})
	}
	m := newModel(t, st, Options{Title: fixTitle}, 160, 50)
	pane := strings.Join(strings.Fields(stripANSI(m.table.View())), " ")
	for _, want := range []string{"(no torch)", "the process uses no torch on this GPU"} {
		if !strings.Contains(pane, want) {
			t.Errorf("the summary lacks %q:\n%s", want, pane)
		}
	}
	if strings.Contains(pane, "no agent") {
		t.Errorf("a JAX process's rows said to have no agent:\n%s", pane)
	}
}
