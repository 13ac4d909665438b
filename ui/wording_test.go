package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// One of a thing is said in the singular.
func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 rows", 1: "1 row", 2: "2 rows"} {
		if got := plural(n, "row"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// A holders report of one group says "1 group, 1 object skipped".
func TestHoldersOneGroup(t *testing.T) {
	st := newFixture()
	st.AgentHolders(fixPID, wire.Holders{Type: wire.TypeHolders, T: at(89 * time.Second), Dev: 0, Total: 64 * mib, Skipped: 1,
		Groups: []wire.HolderGroup{{Kind: "variable", Name: "x", Bytes: 64 * mib, Tensors: 1}}})
	m := newModel(t, st, Options{}, 160, 50)
	m = send(t, m, press("h")...)
	out := ansi.Strip(m.holders.View())
	if !strings.Contains(out, "64.0 MiB in 1 group, 1 object skipped") {
		t.Errorf("holders pane:\n%s", out)
	}
}

// The table's note on a row without NVML figures says what is missing and
// why, not that something failed.
func TestNoNVMLFootnoteIsNoError(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 99, Argv: []string{"python", "nb.py"},
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-zzzz", Name: "NVIDIA A100", Total: 40 * gib}}, T: at(time.Second)})
	st.AgentMark(99, wire.Mark{Type: wire.TypeMark, T: at(2 * time.Second), Label: "start", Devs: []wire.DevStats{{Dev: 0, Allocated: mib, Reserved: 2 * mib, Peak: mib}}})
	now := time.Unix(0, at(3*time.Second))
	m := newModel(t, st, Options{Now: func() time.Time { return now }}, 160, 40)
	tbl := strings.Join(strings.Fields(ansi.Strip(m.table.View())), " ")
	if !strings.Contains(tbl, "— NVML used/peak: not sampled for this GPU then") || strings.Contains(tbl, "no driver") {
		t.Errorf("footnote:\n%s", tbl)
	}
}
